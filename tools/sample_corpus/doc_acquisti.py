"""Public-administration guideline (typeset style): Times with ligature code points in the text layer,
hyphenated line ends, larger bold headings, lettered lists, two-line running header, footer "N - M",
and mixed page sizes (A4 portrait, an A4 landscape annex with a table, back to A4 portrait)."""

from .elements import BLACK, DocStyle, H, HeadingStyle, NewPage, P, Sep, clean, table, ul

STYLE = DocStyle(
    stem="linee_guida_acquisti_ict", title="Linee guida per l'acquisizione di beni e servizi ICT",
    author="Agenzia Regionale per l'Innovazione Digitale",
    subject="Linee guida per gli acquisti ICT degli enti regionali", margins=(78.0, 92.0, 78.0, 78.0),
    body_font="tiro", bold_font="tibo", italic_font="tiit", body_size=12.0, leading=1.42,
    headings=(HeadingStyle("tibo", 15.0, BLACK, 16.0, 8.0), HeadingStyle("tibo", 12.5, BLACK, 12.0, 4.0)),
    hyphenate=True, ligatures=True,
    header_lines=("Agenzia Regionale per l'Innovazione Digitale",
                  "Linee guida per l'acquisizione di beni e servizi ICT"),
    header_align="center", footer_template="{n} - {m}", footer_align="right", furniture_size=9.0,
)

CONTENT = (
    P("Agenzia Regionale per l'Innovazione Digitale", "cover_sub"),
    H(0, "Linee guida per l'acquisizione di beni e servizi ICT"),
    P("Approvate con determinazione del Direttore generale n. 118 del 14 febbraio 2025", "cover_info"),
    P("Edizione 2025 – documento pubblico", "cover_info"),
    NewPage(),
    H(1, "1. Premessa e ambito di applicazione"),
    P(clean("""Le presenti linee guida definiscono le regole comuni che gli enti e le società controllate dalla
    Regione seguono per acquistare beni e servizi informatici: hardware, licenze software, servizi di sviluppo,
    servizi cloud, connettività e assistenza. Il loro obiettivo è rendere gli acquisti più semplici da
    programmare, più facili da confrontare tra un ente e l'altro e coerenti con il Piano triennale per
    l'informatica nella pubblica amministrazione.""")),
    P(clean("""Le linee guida si applicano a tutti gli affidamenti di importo pari o superiore a 5.000 euro, al
    netto dell'IVA. Per gli acquisti di importo inferiore gli enti possono procedere secondo i propri regolamenti
    interni, fermo restando l'obbligo di verificare prima la disponibilità del bene o del servizio nelle
    convenzioni attive della centrale di committenza regionale. Restano esclusi gli acquisti di materiale di
    consumo per stampanti, che seguono la procedura unificata dell'economato.""")),
    P(clean("""Le linee guida non sostituiscono la normativa sui contratti pubblici, ma ne specificano
    l'applicazione per il settore informatico. In caso di contrasto prevale sempre la norma di legge; l'Agenzia
    aggiorna il documento entro sei mesi da ogni modifica normativa rilevante.""")),
    H(1, "2. Definizioni"),
    P(clean("""Ai fini delle presenti linee guida si intende per:""")),
    ul("a)",
       "ente: ciascuna amministrazione o società regionale tenuta all'applicazione delle linee guida;",
       "referente ICT: il dipendente che l'ente designa per coordinare la programmazione degli acquisti informatici;",
       "RUP: il responsabile unico del progetto, nominato per ogni singolo affidamento;",
       "servizio cloud qualificato: un servizio iscritto nel catalogo nazionale dei servizi cloud per la pubblica amministrazione;",
       "fabbisogno: l'esigenza di beni o servizi espressa da un ufficio dell'ente e validata dal referente ICT."),
    H(1, "3. Programmazione degli acquisti"),
    P(clean("""Ogni ente redige un programma biennale degli acquisti ICT, che comprende tutti gli affidamenti
    previsti di importo pari o superiore a 40.000 euro. Il programma è approvato entro il 31 ottobre dell'anno
    che precede il biennio e viene trasmesso all'Agenzia entro i quindici giorni successivi all'approvazione,
    utilizzando il modello pubblicato nel portale regionale degli acquisti. Gli enti che non trasmettono il
    programma entro il termine non possono accedere ai finanziamenti regionali per l'informatica dell'anno
    successivo, salvo un giustificato motivo comunicato per iscritto.""")),
    P(clean("""Per ogni intervento il programma indica l'oggetto, l'importo stimato, la fonte di finanziamento,
    il trimestre in cui si prevede di avviare la procedura e il collegamento con gli obiettivi del Piano
    triennale. Gli interventi che riguardano più enti vengono segnalati all'Agenzia, che valuta la possibilità di
    un acquisto aggregato e ne dà comunicazione agli enti interessati entro trenta giorni dalla ricezione dei
    programmi. Un acquisto aggregato permette di ottenere condizioni economiche migliori e riduce il numero delle
    procedure da gestire, ma richiede che gli enti concordino in anticipo i requisiti tecnici e i tempi di
    consegna.""")),
    P(clean("""Il programma può essere modificato nel corso dell'anno solo per esigenze sopravvenute e
    documentate; le modifiche che comportano un aumento della spesa superiore al venti per cento dell'importo
    complessivo richiedono una nuova approvazione. La classificazione degli affidamenti per importo e le
    procedure applicabili sono riassunte nell'Allegato A.""")),
    H(1, "4. Analisi del fabbisogno e scelta della soluzione"),
    P(clean("""Prima di avviare qualsiasi procedura, il RUP documenta il fabbisogno in una scheda che descrive il
    problema da risolvere, gli utenti coinvolti, i volumi attesi e i vincoli di sicurezza. La scheda confronta
    almeno tre alternative: il riuso di una soluzione già disponibile presso un'altra amministrazione,
    l'adozione di un servizio cloud qualificato e lo sviluppo o l'acquisto di una soluzione dedicata. La scelta
    finale deve essere motivata in base al costo complessivo su cinque anni, che comprende licenze, manutenzione,
    formazione, migrazione dei dati e costi di uscita dal contratto.""")),
    P(clean("""La scheda del fabbisogno è verificata dal referente ICT, che controlla la coerenza con
    l'architettura informatica dell'ente e con il programma biennale. Per gli affidamenti superiori a 140.000 euro
    la scheda viene inviata anche all'Agenzia, che può formulare osservazioni non vincolanti entro venti giorni.
    Trascorso tale termine senza osservazioni, il RUP può procedere.""")),
    H(1, "5. Requisiti dei fornitori"),
    P(clean("""Oltre ai requisiti generali previsti dalla legge, i documenti di gara per servizi informatici
    richiedono di norma che il fornitore dimostri:""")),
    ul("a)",
       "un fatturato specifico per servizi analoghi, negli ultimi tre esercizi, non superiore al doppio dell'importo a base di gara;",
       "la certificazione ISO/IEC 27001 per i servizi che comportano il trattamento di dati personali;",
       "la disponibilità di un gruppo di lavoro con almeno un professionista certificato sulla sicurezza delle informazioni;",
       "per i servizi cloud, l'iscrizione del servizio offerto nel catalogo nazionale dei servizi cloud qualificati."),
    P(clean("""Il requisito di fatturato non può essere richiesto per gli affidamenti di importo inferiore a
    140.000 euro, per non escludere dal mercato le piccole e medie imprese. Il possesso dei requisiti è
    verificato dal RUP prima dell'aggiudicazione, utilizzando il fascicolo virtuale dell'operatore economico.""")),
    H(1, "6. Criteri di valutazione delle offerte"),
    P(clean("""Per i servizi di sviluppo software e di assistenza specialistica l'aggiudicazione avviene con il
    criterio dell'offerta economicamente più vantaggiosa. Il punteggio massimo di 100 punti è ripartito in 80
    punti per l'offerta tecnica e 20 punti per l'offerta economica; il tetto di 20 punti all'elemento economico
    serve a evitare ribassi eccessivi che compromettono la qualità del servizio.""")),
    P(clean("""Il criterio del minor prezzo è ammesso soltanto per le forniture di beni standardizzati, come
    personal computer, monitor o licenze d'uso di prodotti diffusi, le cui caratteristiche sono interamente
    definite nel capitolato. La commissione giudicatrice è composta da tre membri, di cui almeno uno esperto di
    sicurezza informatica quando l'appalto riguarda sistemi che trattano dati sanitari o giudiziari.""")),
    P(clean("""L'offerta tecnica è valutata secondo criteri pubblicati nei documenti di gara, ciascuno con il
    proprio peso. I criteri tipici sono la qualità della soluzione proposta, la metodologia di gestione del
    progetto, il piano di qualità, le misure di sicurezza, la formazione degli utenti e le condizioni di uscita
    dal contratto, compresa la restituzione dei dati in formato aperto. Un'offerta tecnica che non raggiunge
    almeno 48 punti su 80 viene esclusa prima dell'apertura dell'offerta economica.""")),
    H(1, "7. Sicurezza e protezione dei dati"),
    P(clean("""I contratti che comportano il trattamento di dati personali per conto dell'ente includono l'atto
    di nomina del fornitore quale responsabile del trattamento. Il fornitore comunica all'ente ogni violazione
    dei dati personali entro 24 ore dalla scoperta, in modo da permettere all'ente di rispettare il termine di
    72 ore previsto per la notifica all'autorità di controllo.""")),
    P(clean("""I dati devono essere conservati in data center situati nel territorio dell'Unione europea. Alla
    scadenza del contratto il fornitore restituisce tutti i dati in un formato aperto e documentato entro trenta
    giorni e, dopo la conferma dell'ente, ne cancella ogni copia, rilasciando una dichiarazione scritta
    dell'avvenuta cancellazione. Il fornitore documenta inoltre l'ubicazione dei data center utilizzati e
    comunica all'ente, con almeno sessanta giorni di anticipo, ogni trasferimento dei dati in un centro diverso.""")),
    H(1, "8. Esecuzione del contratto e collaudo"),
    P(clean("""Il direttore dell'esecuzione verifica l'andamento del contratto con riunioni periodiche almeno
    mensili e con gli indicatori di qualità previsti dal capitolato, come i tempi di risoluzione delle
    segnalazioni o la disponibilità del servizio. Le penali per il mancato rispetto degli indicatori sono
    calcolate ogni trimestre e non possono superare complessivamente il dieci per cento dell'importo
    contrattuale.""")),
    P(clean("""La verifica di conformità dei sistemi software si svolge in un ambiente di collaudo separato da
    quello di produzione e si conclude entro sessanta giorni dalla consegna. Se la verifica ha esito negativo, il
    fornitore ha venti giorni per eliminare i difetti, dopo di che la verifica viene ripetuta una sola volta. Il
    pagamento del saldo, pari al venti per cento dell'importo, avviene solo dopo l'esito positivo della
    verifica.""")),
    H(1, "9. Entrata in vigore"),
    P(clean("""Le presenti linee guida entrano in vigore il 1° aprile 2025 e si applicano alle procedure avviate
    da tale data. Le procedure già avviate si concludono secondo le regole precedenti. Per chiarimenti gli enti
    possono scrivere all'indirizzo acquisti.ict@arid.example, indicando nell'oggetto il numero del paragrafo a
    cui si riferisce la domanda.""")),
    Sep("_"),
    P(clean("""Il Direttore generale dell'Agenzia Regionale per l'Innovazione Digitale"""), "note"),
    NewPage("A4L"),
    H(1, "Allegato A – Soglie e procedure di affidamento"),
    P(clean("""La tabella riassume le procedure che gli enti utilizzano in base all'importo stimato
    dell'affidamento, al netto dell'IVA, e i tempi massimi entro cui la procedura deve concludersi.""")),
    table("""
        Fascia | Importo stimato | Procedura | Pubblicità | Durata massima
        F1 | da 5.000 a 40.000 euro | affidamento diretto | sito dell'ente | 30 giorni
        F2 | da 40.000 a 140.000 euro | affidamento diretto con tre preventivi | sito dell'ente | 60 giorni
        F3 | da 140.000 euro alla soglia europea | procedura negoziata con cinque operatori | portale regionale | 4 mesi
        F4 | oltre la soglia europea | procedura aperta | Gazzetta UE e portale regionale | 6 mesi""", (0.07, 0.25, 0.30, 0.22, 0.16)),
    P(clean("""Per gli acquisti tramite convenzioni e accordi quadro della centrale di committenza regionale
    non si applicano le durate massime indicate: l'ordine deve essere emesso entro quindici giorni dalla
    determina a contrarre.""")),
    NewPage("A4"),
    H(1, "Allegato B – Contenuto minimo della scheda del fabbisogno"),
    ul("a)",
       "descrizione del problema e degli obiettivi, con gli indicatori che misureranno il risultato;",
       "numero e tipologia degli utenti interni ed esterni coinvolti;",
       "confronto tra riuso, servizio cloud qualificato e soluzione dedicata;",
       "stima del costo complessivo su cinque anni;",
       "rischi per la sicurezza e per la protezione dei dati personali;",
       "piano di uscita dal contratto e modalità di restituzione dei dati."),
)
