"""Public-administration manual (AgID style): numbered headings ("3.2 Ruoli"), TOC with dotted leaders,
chapters on new pages, • bullets, lettered lists, a retention table, a dotted separator line, two-line running
header, footer "Pag. N di M"."""

from .elements import TOC, DocStyle, H, HeadingStyle, NewPage, P, Sep, clean, table, ul

GREEN = (0.05, 0.33, 0.20)

STYLE = DocStyle(
    stem="manuale_conservazione_digitale",
    title="Comune di Valfiorita - Manuale di conservazione dei documenti informatici",
    author="Comune di Valfiorita - Servizio archivio e protocollo", subject="Manuale di conservazione",
    margins=(72.0, 96.0, 72.0, 80.0), body_size=11.5, leading=1.5, para_space=8.0,
    headings=(HeadingStyle("hebo", 16.0, GREEN, 4.0, 12.0), HeadingStyle("hebo", 12.5, GREEN, 14.0, 5.0)),
    chapter_new_page=True,
    header_lines=("Comune di Valfiorita", "Manuale di conservazione dei documenti informatici – versione 2.1"),
    footer_template="Pag. {n} di {m}", footer_align="right",
)

CONTENT = (
    P("Comune di Valfiorita", "cover_sub"),
    P("Servizio archivio e protocollo", "cover_info"),
    H(0, "Manuale di conservazione dei documenti informatici"),
    P("Versione 2.1 – adottato con deliberazione della Giunta comunale n. 47 del 20 marzo 2025", "cover_info"),
    NewPage(),
    TOC("Sommario", 2),
    H(1, "1 Introduzione"),
    H(2, "1.1 Scopo e ambito del documento"),
    P(clean("""Il presente manuale descrive il sistema di conservazione dei documenti informatici del Comune di
    Valfiorita: l'organizzazione, i ruoli, gli oggetti conservati, il processo di conservazione e le misure di
    sicurezza adottate. La conservazione ha lo scopo di mantenere nel tempo l'integrità, l'autenticità, la
    leggibilità e la reperibilità dei documenti, dal momento del loro versamento fino allo scarto o al
    trasferimento all'archivio storico.""")),
    P(clean("""Il Comune ha affidato il servizio di conservazione a un conservatore esterno, Archivia Digitale
    S.p.A., che possiede i requisiti previsti dalla normativa e opera secondo il proprio manuale del
    conservatore. Il presente documento integra quel manuale con le scelte specifiche del Comune e resta valido
    anche in caso di cambio del conservatore, salvo le parti che ne indicano il nome.""")),
    H(2, "1.2 Aggiornamento del manuale"),
    P(clean("""Il manuale è aggiornato dal responsabile della conservazione almeno ogni due anni e comunque
    entro novanta giorni da ogni modifica rilevante dell'organizzazione, dei sistemi o della normativa. Ogni
    versione approvata è pubblicata nella sezione Amministrazione trasparente del sito istituzionale; le
    versioni precedenti sono conservate insieme ai documenti a cui si riferiscono.""")),
    H(1, "2 Ruoli e responsabilità"),
    H(2, "2.1 Responsabile della conservazione"),
    P(clean("""Il responsabile della conservazione è nominato dal Sindaco tra i dirigenti o i funzionari
    dell'ente in possesso di adeguate competenze giuridiche, informatiche e archivistiche. Attualmente il ruolo è
    ricoperto dalla responsabile del Servizio archivio e protocollo. Il responsabile della conservazione:""")),
    ul("•",
       "definisce le politiche di conservazione e i formati ammessi, d'accordo con il responsabile della gestione documentale;",
       "verifica periodicamente, almeno una volta all'anno, il corretto funzionamento del sistema e l'integrità di un campione di pacchetti;",
       "controlla l'operato del conservatore esterno sulla base del contratto di servizio;",
       "provvede, in caso di cessazione del contratto, al trasferimento dei pacchetti a un nuovo conservatore senza perdita di informazioni."),
    H(2, "2.2 Altri ruoli"),
    P(clean("""Il produttore dei pacchetti di versamento è il responsabile della gestione documentale, che
    prepara i documenti e i relativi metadati e li trasmette al sistema di conservazione. Gli utenti abilitati
    alla consultazione sono i dipendenti del Comune autorizzati dal proprio dirigente e, per i documenti
    accessibili, i cittadini che presentano una richiesta di accesso. Il responsabile della protezione dei dati
    viene consultato su ogni modifica del processo che riguardi dati personali.""")),
    H(1, "3 Oggetti della conservazione"),
    H(2, "3.1 Tipologie documentali"),
    P(clean("""Sono sottoposti a conservazione tutti i documenti informatici registrati nel protocollo o nei
    repertori dell'ente, insieme ai fascicoli informatici a cui appartengono. La tabella seguente indica, per le
    principali tipologie, il termine entro il quale i documenti sono versati in conservazione e il tempo minimo
    di conservazione previsto dal piano di conservazione.""")),
    table("""
        Tipologia documentale | Versamento | Conservazione
        Registro giornaliero di protocollo | entro il giorno successivo | illimitata
        Deliberazioni e determinazioni | entro 30 giorni | illimitata
        Contratti e convenzioni | entro 60 giorni | illimitata
        Fatture elettroniche | entro 90 giorni | 10 anni
        Mandati e reversali | a fine esercizio | 10 anni
        Pratiche edilizie | alla chiusura del fascicolo | illimitata""", (0.42, 0.34, 0.24)),
    H(2, "3.2 Formati ammessi"),
    P(clean("""Per garantire la leggibilità nel tempo sono accettati in conservazione soltanto formati aperti,
    standardizzati e documentati. I formati ammessi sono PDF/A per i documenti testuali e le immagini di
    documenti, XML per i dati strutturati e le fatture, TIFF e JPEG per le fotografie e le planimetrie, ODF per i
    fogli di calcolo che devono restare modificabili. I documenti prodotti in altri formati vengono convertiti
    prima del versamento; la conversione è attestata con una dichiarazione di conformità del responsabile
    della gestione documentale.""")),
    H(2, "3.3 Metadati minimi"),
    P(clean("""Ogni documento versato è accompagnato almeno dai seguenti metadati:""")),
    ul("a)",
       "identificativo univoco e persistente;",
       "data di chiusura del documento;",
       "oggetto;",
       "soggetti che hanno formato il documento (autore, mittente, destinatario);",
       "impronta crittografica del documento, calcolata con l'algoritmo SHA-256;",
       "classificazione e fascicolo di appartenenza."),
    P(clean("""I metadati sono trasmessi in un file XML conforme allo schema pubblicato dal conservatore, che
    accompagna ogni documento all'interno del pacchetto di versamento. Per le tipologie che lo richiedono si
    aggiungono metadati specifici, come il codice identificativo di gara per i contratti o il numero di
    repertorio per le deliberazioni.""")),
    H(1, "4 Processo di conservazione"),
    H(2, "4.1 Versamento"),
    P(clean("""Il sistema di gestione documentale genera in modo automatico i pacchetti di versamento, ciascuno
    con al massimo 1.000 documenti, e li trasmette al conservatore attraverso un canale cifrato. Il conservatore
    controlla ogni pacchetto: verifica le firme digitali, i formati, la presenza dei metadati obbligatori e la
    corrispondenza delle impronte. Se tutti i controlli hanno esito positivo, genera il rapporto di versamento
    entro due giorni lavorativi dalla ricezione; in caso contrario rifiuta il pacchetto indicando i documenti
    che hanno causato il rifiuto, e il produttore lo ritrasmette dopo aver corretto gli errori.""")),
    H(2, "4.2 Conservazione e controlli periodici"),
    P(clean("""I pacchetti accettati vengono trasformati in pacchetti di archiviazione e memorizzati in due
    copie, conservate in due data center situati a oltre 200 chilometri di distanza l'uno dall'altro. Ogni sei
    mesi il conservatore verifica l'integrità di tutti i pacchetti confrontando le impronte; ogni anno il
    responsabile della conservazione esamina un campione di almeno cinquanta documenti scelti a caso, aprendoli
    con gli strumenti indicati nel piano dei formati.""")),
    H(2, "4.3 Esibizione e scarto"),
    P(clean("""Gli utenti autorizzati richiedono i documenti conservati attraverso il portale del conservatore;
    il pacchetto di distribuzione è reso disponibile entro due giorni lavorativi oppure entro quattro ore per le
    richieste urgenti dell'autorità giudiziaria. I documenti che hanno raggiunto il termine di conservazione
    vengono scartati solo dopo l'autorizzazione della Soprintendenza archivistica competente; l'elenco dei
    documenti scartati è a sua volta conservato senza limiti di tempo.""")),
    H(1, "5 Sicurezza del sistema"),
    P(clean("""Le misure di sicurezza del sistema di conservazione sono descritte nel piano della sicurezza del
    conservatore, che il Comune ha verificato al momento dell'affidamento. Le principali sono la cifratura dei
    pacchetti durante la trasmissione, il controllo degli accessi con autenticazione a due fattori, la
    registrazione di ogni operazione nei log di sistema, conservati per almeno cinque anni, e un piano di
    continuità operativa che prevede il ripristino del servizio entro 48 ore in caso di guasto grave.""")),
    P(clean("""Il responsabile della conservazione riceve ogni anno dal conservatore una relazione sulla
    sicurezza, che riporta gli incidenti avvenuti, le vulnerabilità risolte e l'esito delle prove di ripristino.
    La relazione è allegata al rapporto annuale sulla conservazione presentato alla Giunta entro il 31 marzo.""")),
    Sep("."),
    P(clean("""Per informazioni sul sistema di conservazione è possibile rivolgersi al Servizio archivio e
    protocollo, all'indirizzo archivio@comune.valfiorita.example."""), "note"),
)
