"""Software manual (Word style): numbered headings in larger bold fonts, TOC with dotted leaders, detached
Symbol bullets, numbered lists, a requirements table, running header and footer "Pagina N di M"."""

from .elements import BLACK, TOC, DocStyle, H, HeadingStyle, NewPage, P, clean, table, ul

BLUE = (0.12, 0.24, 0.48)

STYLE = DocStyle(
    stem="manuale_software_gestionale", title="GestiDoc 4 - Manuale utente",
    author="Studio Informatica Valdarno S.r.l.",
    subject="Manuale utente del sistema di gestione documentale GestiDoc 4", margins=(70.0, 86.0, 70.0, 80.0),
    leading=1.45, para_space=7.0,
    headings=(HeadingStyle("hebo", 18.0, BLUE, 4.0, 12.0),
              HeadingStyle("hebo", 13.5, BLUE, 14.0, 6.0),
              HeadingStyle("hebo", 11.5, BLACK, 10.0, 4.0)),
    chapter_new_page=True, header_lines=("GestiDoc 4 – Manuale utente",), footer_left="Versione 4.2 – marzo 2025",
    footer_template="Pagina {n} di {m}", footer_align="right",
)

CONTENT = (
    H(0, "GestiDoc 4"),
    P("Manuale utente", "cover_sub"),
    P("Sistema di gestione documentale e protocollo informatico", "cover_sub"),
    P("Versione 4.2 – marzo 2025", "cover_info"),
    P("Studio Informatica Valdarno S.r.l. – Via dei Mille 14, 52100 Arezzo", "cover_info"),
    NewPage(),
    TOC("Indice", 2),
    H(1, "1 Introduzione"),
    H(2, "1.1 Scopo del documento"),
    P(clean("""Il presente manuale descrive l'installazione, la configurazione e l'uso quotidiano di GestiDoc 4,
    il sistema di gestione documentale pensato per piccoli enti pubblici, studi professionali e aziende fino a
    cinquanta dipendenti. Il manuale si riferisce alla versione 4.2 del prodotto, rilasciata nel marzo 2025, e
    sostituisce integralmente la documentazione delle versioni 3.x.""")),
    P(clean("""GestiDoc consente di acquisire documenti digitali e cartacei, di classificarli secondo un titolario,
    di registrarli nel protocollo informatico e di conservarne tutte le versioni. Ogni operazione rilevante viene
    tracciata nel registro delle attività, che può essere consultato dagli amministratori e rimane disponibile per
    almeno dieci anni.""")),
    H(2, "1.2 Destinatari"),
    P(clean("""Il manuale è rivolto a tre categorie di lettori: gli amministratori di sistema, che installano il
    prodotto e ne curano la manutenzione; i responsabili d'archivio, che definiscono il titolario e i profili di
    accesso; gli operatori, che ogni giorno caricano, ricercano e protocollano i documenti. I capitoli 2 e 6 sono
    destinati soprattutto agli amministratori, mentre i capitoli 3, 4 e 5 interessano tutti gli utenti.""")),
    H(2, "1.3 Convenzioni tipografiche"),
    P(clean("""I nomi dei pulsanti e delle voci di menu sono riportati tra virgolette, ad esempio «Salva» o
    «Nuovo documento». I percorsi dei menu sono indicati separando le voci con una freccia, come in Strumenti →
    Impostazioni → Sicurezza. Le note che richiedono particolare attenzione sono scritte in corsivo e rientrate
    rispetto al testo.""")),
    P(clean("""Nelle istruzioni passo per passo, ogni passo descrive un'unica azione dell'utente. Se un passo non
    produce il risultato atteso, non proseguire con i passi successivi ma consultare il capitolo 7 oppure
    contattare l'assistenza."""), "note"),
    H(1, "2 Installazione"),
    H(2, "2.1 Requisiti di sistema"),
    P(clean("""GestiDoc 4 è composto da un server applicativo, da un database PostgreSQL e da un client web che
    funziona nei principali browser. Per installazioni con più di venti utenti contemporanei si consiglia di
    separare il database dal server applicativo. La tabella seguente riporta i requisiti minimi e consigliati per
    ciascun componente.""")),
    table("""
        Componente | Requisito minimo | Configurazione consigliata
        Server applicativo | 4 core, 8 GB di RAM | 8 core, 16 GB di RAM
        Database PostgreSQL | versione 14, 4 GB di RAM | versione 16, 16 GB di RAM
        Spazio su disco | 200 GB | 1 TB su RAID 1
        Sistema operativo | Debian 12 o Windows Server 2019 | Debian 12
        Browser del client | Firefox 115 o Chrome 120 | ultima versione stabile""", (0.28, 0.36, 0.36)),
    P(clean("""Il server deve poter raggiungere il servizio di attivazione delle licenze all'indirizzo
    licenze.gestidoc.example sulla porta 443. Se la rete dell'ente utilizza un proxy, il suo indirizzo va indicato
    durante l'installazione; in alternativa è possibile attivare la licenza con il file di attivazione descritto
    nel paragrafo 2.3.""")),
    H(2, "2.2 Procedura di installazione"),
    P(clean("""L'installazione richiede circa trenta minuti e deve essere eseguita da un utente con privilegi di
    amministratore. Prima di iniziare, verificare di avere a disposizione il codice di licenza ricevuto via posta
    elettronica e le credenziali del database.""")),
    ul("1.",
       "Scaricare il pacchetto di installazione dall'area clienti e verificarne l'impronta SHA-256 riportata nella pagina di download.",
       "Avviare il programma di installazione e accettare il contratto di licenza.",
       "Indicare la cartella di installazione; il valore predefinito è /opt/gestidoc su Linux e C:\\GestiDoc su Windows.",
       "Inserire i parametri di connessione al database: nome del server, porta, nome del database, utente e password.",
       "Scegliere la porta del servizio web; il valore predefinito è 8443.",
       "Attendere la creazione delle tabelle e il caricamento del titolario di esempio.",
       "Al termine, aprire il browser all'indirizzo indicato e accedere con l'utente admin e la password temporanea mostrata a video."),
    P(clean("""La password temporanea dell'utente admin scade dopo 24 ore: se non viene cambiata entro questo
    termine, l'account viene bloccato e occorre rigenerarla dalla riga di comando del server con il comando
    gestidoc-admin reset-password."""), "note"),
    H(2, "2.3 Attivazione della licenza"),
    P(clean("""Al primo accesso GestiDoc chiede il codice di licenza, composto da cinque gruppi di quattro
    caratteri separati da trattini. L'attivazione online richiede pochi secondi. Quando il server non può
    raggiungere Internet, l'amministratore può scegliere l'attivazione tramite file: il programma genera un file
    di richiesta, che va caricato nell'area clienti da un altro computer; il file di risposta ottenuto deve essere
    importato entro 72 ore dalla generazione della richiesta.""")),
    P(clean("""La licenza standard comprende fino a 25 utenti nominali e un anno di aggiornamenti. Le licenze
    aggiuntive si acquistano a pacchetti di cinque utenti e hanno la stessa scadenza della licenza principale.""")),
    H(1, "3 Primo accesso e profili utente"),
    H(2, "3.1 Accesso al sistema"),
    P(clean("""Per accedere a GestiDoc occorre aprire il browser all'indirizzo comunicato dall'amministratore e
    inserire nome utente e password. Se l'ente ha configurato l'accesso con SPID o con la Carta d'identità
    elettronica, nella pagina di accesso compare anche il pulsante «Entra con SPID» oppure «Entra con CIE». Dopo
    cinque tentativi falliti consecutivi l'account viene bloccato per quindici minuti; il blocco può essere rimosso
    prima da un amministratore.""")),
    P(clean("""La sessione scade dopo 30 minuti di inattività. Le modifiche non salvate ai metadati di un documento
    vengono conservate come bozza e riproposte al successivo accesso, mentre i caricamenti di file interrotti
    devono essere ripetuti.""")),
    H(2, "3.2 Profili utente"),
    P(clean("""Ogni utente ha uno o più profili, che determinano le funzioni disponibili e i fascicoli visibili.
    GestiDoc prevede quattro profili predefiniti:""")),
    ul("detached",
       "Amministratore: gestisce utenti, licenze, backup e parametri di sistema, ma non vede il contenuto dei documenti riservati.",
       "Responsabile d'archivio: definisce il titolario, crea i fascicoli e assegna i permessi sui fascicoli.",
       "Protocollista: registra la corrispondenza in entrata e in uscita e annulla le registrazioni errate.",
       "Operatore: carica documenti, compila i metadati e consulta i fascicoli per i quali ha il permesso di lettura."),
    P(clean("""I profili possono essere combinati: un utente di un piccolo ufficio può essere, ad esempio, sia
    protocollista sia operatore. Non è invece possibile assegnare allo stesso utente i profili di amministratore e
    di responsabile d'archivio, per garantire la separazione dei compiti richiesta dalle linee guida sulla
    gestione documentale.""")),
    H(2, "3.3 Regole per le password"),
    P(clean("""Le password devono contenere almeno 12 caratteri, tra cui almeno una lettera maiuscola, una
    lettera minuscola, una cifra e un carattere speciale. Una password scade dopo 90 giorni e non può essere
    uguale a nessuna delle ultime cinque password utilizzate. L'amministratore può rendere obbligatoria
    l'autenticazione a due fattori per tutti gli utenti oppure solo per i profili di amministratore e di
    protocollista.""")),
    H(1, "4 Gestione dei documenti"),
    H(2, "4.1 Caricamento dei documenti"),
    P(clean("""I documenti si caricano dalla scrivania con il pulsante «Nuovo documento» oppure trascinando uno o
    più file nella finestra del browser. GestiDoc accetta i formati PDF, PDF/A, ODT, DOCX, XLSX, TXT, XML, JPEG,
    PNG e TIFF; la dimensione massima di un singolo file è di 200 MB. I file compressi ZIP vengono rifiutati,
    perché il loro contenuto non può essere indicizzato né verificato.""")),
    P(clean("""Durante il caricamento il sistema calcola l'impronta SHA-256 del file, estrae il testo per la
    ricerca e, per i documenti scansionati, esegue il riconoscimento ottico dei caratteri in lingua italiana.
    Il riconoscimento di un documento di cinquanta pagine richiede in media due minuti; nel frattempo il documento
    è già consultabile, ma non compare ancora nei risultati della ricerca a testo libero.""")),
    H(2, "4.2 Metadati obbligatori"),
    P(clean("""Un documento può essere salvato solo dopo aver compilato i metadati obbligatori. Quelli richiesti
    in tutte le configurazioni sono:""")),
    ul("detached",
       "l'oggetto, di almeno dieci caratteri;",
       "la classificazione secondo il titolario;",
       "il fascicolo di appartenenza;",
       "la data del documento;",
       "il livello di riservatezza (pubblico, interno, riservato)."),
    P(clean("""Il responsabile d'archivio può rendere obbligatori altri metadati per singole classi del titolario,
    ad esempio il codice identificativo di gara per i documenti dei contratti pubblici o il numero di matricola
    per i fascicoli del personale. I metadati obbligatori aggiuntivi sono evidenziati da un asterisco rosso nella
    maschera di inserimento.""")),
    H(2, "4.3 Versioni di un documento"),
    P(clean("""Ogni volta che un utente carica una nuova versione di un documento già registrato, GestiDoc
    conserva anche le versioni precedenti, che restano consultabili ma non modificabili. Il numero della versione
    aumenta di un'unità a ogni caricamento. Una versione può essere eliminata solo dal responsabile d'archivio e
    solo se il documento non è stato protocollato; in ogni caso, l'eliminazione viene registrata nel registro
    delle attività con il nome dell'utente, la data e il motivo indicato. Per confrontare due versioni di un
    documento di testo si seleziona la voce «Confronta versioni» dal menu del documento: le parti aggiunte sono
    evidenziate in verde e quelle rimosse in rosso. Il numero massimo di versioni conservate per ciascun
    documento è stabilito dal responsabile d'archivio e vale cinquanta se non viene modificato; al
    raggiungimento del limite il sistema chiede quale versione spostare nell'archivio compresso.""")),
    H(2, "4.4 Ricerca"),
    P(clean("""La barra di ricerca in alto cerca contemporaneamente nei metadati e nel testo dei documenti. Per
    una ricerca più precisa si usa la ricerca avanzata, che permette di combinare filtri sulla classificazione,
    sull'intervallo di date, sull'autore e sul livello di riservatezza. Le ricerche usate di frequente possono
    essere salvate e compaiono nel riquadro «Ricerche salvate» della scrivania; ogni utente può salvarne al
    massimo venti.""")),
    H(1, "5 Protocollo informatico"),
    H(2, "5.1 Registrazione di protocollo"),
    P(clean("""La registrazione di protocollo assegna al documento un numero progressivo annuale, che riparte da
    1 il primo gennaio di ogni anno, insieme alla data e all'ora di registrazione. I dati registrati non possono
    essere modificati: un errore si corregge soltanto annullando la registrazione e procedendo a una nuova.""")),
    P(clean("""Per protocollare un documento in entrata il protocollista apre il documento, sceglie «Protocolla»
    e completa il mittente, l'oggetto e il mezzo di ricezione. Se il documento è arrivato tramite posta
    elettronica certificata, il mittente e l'oggetto vengono proposti automaticamente a partire dal messaggio.
    Al termine il sistema appone sul documento la segnatura di protocollo e invia, se richiesto, la ricevuta al
    mittente.""")),
    H(2, "5.2 Annullamento di una registrazione"),
    P(clean("""Solo il protocollista e il responsabile d'archivio possono annullare una registrazione. Nella
    finestra di annullamento occorre indicare gli estremi del provvedimento che autorizza l'annullamento; la
    registrazione annullata resta visibile nel registro, barrata, con la data dell'annullamento e il nome di
    chi lo ha eseguito. Il registro giornaliero di protocollo viene generato automaticamente ogni notte alle ore
    23:30 e inviato al sistema di conservazione entro la giornata lavorativa successiva.""")),
    H(1, "6 Backup e manutenzione"),
    P(clean("""GestiDoc esegue ogni notte alle ore 2:00 un backup completo del database e un backup incrementale
    dell'archivio dei file. I backup vengono conservati per trenta giorni nella cartella indicata durante
    l'installazione; si raccomanda di copiarli ogni settimana su un supporto esterno o su uno spazio di
    archiviazione remoto, conservato in un edificio diverso da quello del server.""")),
    P(clean("""Il ripristino si esegue dalla riga di comando con gestidoc-admin restore, indicando la data del
    backup da ripristinare. Durante il ripristino il servizio web viene arrestato e gli utenti non possono
    accedere. Il tempo di ripristino dipende dalla quantità di documenti: per un archivio di 100.000 documenti
    occorre in media un'ora e mezza.""")),
    P(clean("""Gli aggiornamenti minori, indicati dalla terza cifra del numero di versione, si installano dal
    pannello di amministrazione senza interrompere il servizio. Gli aggiornamenti maggiori richiedono invece un
    fermo del sistema e la verifica preventiva dello spazio su disco disponibile, che deve essere almeno pari al
    doppio della dimensione del database.""")),
    H(1, "7 Assistenza"),
    P(clean("""Il servizio di assistenza è disponibile dal lunedì al venerdì, dalle 8:30 alle 17:30, esclusi i
    giorni festivi. Le richieste si aprono dall'area clienti oppure scrivendo a assistenza@gestidoc.example; per i
    blocchi totali del servizio è attivo anche il numero telefonico 0575 123456.""")),
    P(clean("""Ogni richiesta riceve un numero di ticket. Le segnalazioni di blocco totale vengono prese in carico
    entro due ore lavorative, quelle di malfunzionamento parziale entro otto ore lavorative e le richieste di
    informazioni entro tre giorni lavorativi. Per accelerare la soluzione è utile allegare alla richiesta il file
    di diagnostica, che si genera da Strumenti → Diagnostica → Esporta.""")),
)
