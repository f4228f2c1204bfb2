"""API guide in two columns: paragraphs that flow from column to column and across pages, ▪ bullets,
hyphenated line ends, code lines in Courier, a table of error codes inside a column, running header and
footer "Pagina N di M"."""

from .elements import DocStyle, H, HeadingStyle, NewPage, P, Sep, clean, table, ul

TEAL = (0.0, 0.36, 0.42)

STYLE = DocStyle(
    stem="guida_api_servizi_pagamento", title="PagoFacile API v2 - Guida per gli sviluppatori",
    author="Consorzio PagoFacile dei Comuni", subject="Guida all'integrazione delle API di pagamento PagoFacile",
    margins=(54.0, 80.0, 54.0, 70.0), body_size=10.0, leading=1.42, para_space=5.0,
    headings=(HeadingStyle("hebo", 14.0, TEAL, 12.0, 6.0), HeadingStyle("hebo", 11.0, TEAL, 9.0, 3.0)), columns=2,
    column_gap=22.0, hyphenate=True, header_lines=("PagoFacile API v2 – Guida per gli sviluppatori",),
    footer_template="Pagina {n} di {m}", list_indent=13.0,
)

CONTENT = (
    P("Consorzio PagoFacile dei Comuni", "cover_sub"),
    H(0, "PagoFacile API v2"),
    P("Guida per gli sviluppatori", "cover_sub"),
    P("Documento tecnico – edizione 2.3 del 5 maggio 2025", "cover_info"),
    P("Destinatari: software house e uffici informatici degli enti aderenti", "cover_info"),
    NewPage(),
    H(1, "1 Introduzione"),
    P(clean("""PagoFacile è il servizio con cui i comuni del consorzio incassano tributi, rette scolastiche,
    sanzioni e diritti di segreteria. Le API REST descritte in questa guida permettono ai gestionali degli enti di
    creare posizioni debitorie, generare avvisi di pagamento, ricevere le notifiche di avvenuto pagamento e
    scaricare le rendicontazioni giornaliere. Tutte le API scambiano dati in formato JSON con codifica UTF-8 e
    usano esclusivamente il protocollo HTTPS con TLS 1.2 o superiore.""")),
    P(clean("""La versione 2 sostituisce la versione 1, che resterà disponibile fino al 31 dicembre 2025.
    Le principali novità sono l'autenticazione OAuth 2.0, le notifiche firmate e il supporto dei pagamenti
    rateali. I dati delle posizioni create con la versione 1 sono accessibili anche dalla versione 2 senza
    alcuna migrazione.""")),
    H(1, "2 Ambienti"),
    P(clean("""Sono disponibili due ambienti separati, ciascuno con le proprie credenziali. L'ambiente di
    collaudo è destinato alle prove di integrazione e non genera incassi reali: i pagamenti vengono simulati e
    gli avvisi riportano la dicitura «non valido per il pagamento». L'ambiente di produzione è accessibile solo
    dopo il superamento dei test di certificazione descritti nel capitolo 8.""")),
    ul("▪",
       "Collaudo: https://collaudo.pagofacile.example/api/v2",
       "Produzione: https://api.pagofacile.example/api/v2"),
    P(clean("""L'ambiente di collaudo viene azzerato la prima domenica di ogni mese: le posizioni create in
    collaudo sono quindi cancellate automaticamente e non devono essere usate come dati di riferimento per i
    test automatici di lunga durata.""")),
    H(1, "3 Autenticazione"),
    P(clean("""Le API usano il flusso OAuth 2.0 client credentials. Ogni ente riceve un identificativo client e
    un segreto per ciascun ambiente; il segreto va custodito sul server e non deve mai essere inserito in
    applicazioni installate sui dispositivi degli utenti. Per ottenere un token di accesso il gestionale invia
    una richiesta POST all'endpoint /oauth/token, indicando l'ambito delle operazioni richieste.""")),
    P("POST /oauth/token / grant_type=client_credentials / scope=posizioni.scrittura rendiconti.lettura", "code"),
    P(clean("""Il token di accesso ha una validità di 3600 secondi e va inviato in ogni chiamata nell'intestazione
    Authorization, preceduto dalla parola Bearer. Non esiste un token di aggiornamento: alla scadenza il
    gestionale richiede un nuovo token con le stesse credenziali. Si raccomanda di riutilizzare il token fino a
    pochi minuti prima della scadenza, perché l'endpoint /oauth/token accetta al massimo 10 richieste al minuto
    per ciascun client.""")),
    P(clean("""Il segreto del client scade dopo 12 mesi. Trenta giorni prima della scadenza il referente tecnico
    dell'ente riceve un messaggio di posta elettronica con le istruzioni per generare un nuovo segreto dal
    portale degli sviluppatori; per un periodo di sette giorni il vecchio e il nuovo segreto sono validi
    contemporaneamente, così da permettere l'aggiornamento senza interruzioni del servizio.""")),
    H(1, "4 Posizioni debitorie"),
    H(2, "4.1 Creazione"),
    P(clean("""Una posizione debitoria rappresenta una somma che un cittadino o un'impresa deve all'ente. Si crea
    con una richiesta POST all'endpoint /posizioni. I campi obbligatori del corpo della richiesta sono:""")),
    ul("▪",
       "idPosizione: identificativo univoco assegnato dal gestionale, al massimo 35 caratteri;",
       "debitore: codice fiscale o partita IVA, nome e indirizzo di posta elettronica;",
       "importo: in centesimi di euro, come numero intero;",
       "causale: testo libero di al massimo 140 caratteri, mostrato al cittadino;",
       "scadenza: data nel formato AAAA-MM-GG;",
       "codiceTributo: il codice del servizio concordato con il tesoriere dell'ente."),
    P('{"idPosizione": "TARI-2025-000123", "importo": 18750, / "causale": "TARI 2025 prima rata", / "scadenza": "2025-07-31"}', "code"),
    P(clean("""Se la richiesta è corretta, il servizio risponde con il codice HTTP 201 e restituisce il codice
    avviso di 18 cifre, che identifica il pagamento in tutti i canali, e il collegamento per scaricare l'avviso
    in formato PDF. Per le posizioni rateali si indica il campo rate, un elenco di al massimo 12 rate ciascuna
    con il proprio importo e la propria scadenza: ogni rata riceve un codice avviso distinto.""")),
    H(2, "4.2 Chiave di idempotenza"),
    P(clean("""Le richieste di creazione devono contenere l'intestazione Idempotency-Key con un valore univoco,
    ad esempio un UUID. Se la stessa richiesta viene ripetuta con la stessa chiave entro 24 ore, per esempio dopo
    un errore di rete, il servizio non crea una seconda posizione ma restituisce la risposta originale. Una
    chiave già usata con un corpo della richiesta diverso produce invece l'errore 409.""")),
    H(2, "4.3 Modifica e annullamento"),
    P(clean("""L'importo e la scadenza di una posizione possono essere modificati con una richiesta PATCH finché
    la posizione non risulta pagata. L'annullamento si esegue con una richiesta DELETE e rende il codice avviso
    non più pagabile; una posizione pagata non può essere annullata, e per restituire una somma incassata per
    errore occorre seguire la procedura di rimborso prevista dal regolamento delle entrate dell'ente.""")),
    H(1, "5 Notifiche di pagamento"),
    P(clean("""Quando un pagamento viene eseguito, PagoFacile invia una notifica all'indirizzo configurato dall'ente
    nel portale degli sviluppatori. La notifica è una richiesta POST con corpo JSON che contiene il codice avviso,
    l'importo pagato, la data e l'ora del pagamento, il canale utilizzato e l'identificativo univoco della
    ricevuta. Ogni notifica è firmata con HMAC-SHA256: la firma si trova nell'intestazione X-PagoFacile-Firma e
    va verificata con la chiave di firma dell'ente prima di registrare il pagamento.""")),
    P(clean("""Il gestionale deve rispondere con un codice HTTP 200 entro 10 secondi. In caso di errore o di mancata
    risposta, la notifica viene ritrasmessa fino a cinque volte, dopo 1, 5, 15, 60 e 240 minuti. Dopo l'ultimo
    tentativo fallito la notifica resta consultabile nel portale e il pagamento compare comunque nella
    rendicontazione del giorno successivo.""")),
    H(1, "6 Rendicontazione"),
    P(clean("""Ogni giorno lavorativo, entro le ore 7:00, è disponibile il flusso di rendicontazione dei pagamenti
    accreditati il giorno precedente sul conto di tesoreria. Il flusso si scarica con una richiesta GET
    all'endpoint /rendiconti indicando la data; le risposte con molti elementi sono suddivise in pagine di 500
    pagamenti ciascuna, e il campo successiva contiene l'indirizzo della pagina seguente. I flussi restano
    disponibili per 13 mesi.""")),
    H(1, "7 Limiti ed errori"),
    P(clean("""Ogni client può eseguire al massimo 100 richieste al minuto verso le API. Oltre questo limite il
    servizio risponde con il codice 429 e l'intestazione Retry-After, che indica dopo quanti secondi è possibile
    riprovare. Gli errori sono descritti nel corpo della risposta con un codice interno e un messaggio in
    italiano; la tabella riporta i codici HTTP più frequenti.""")),
    table("""
        HTTP | Significato | Cosa fare
        400 | dati non validi | correggere i campi
        401 | token scaduto | nuovo token
        403 | scope errato | verificare lo scope
        404 | non trovata | controllare l'id
        409 | conflitto | rileggere i dati
        429 | troppe richieste | attendere
        503 | manutenzione | riprovare più tardi""", (0.18, 0.38, 0.44)),
    P(clean("""Le finestre di manutenzione programmata si svolgono il martedì dalle 22:00 alle 24:00 e sono
    annunciate nel portale con almeno cinque giorni di anticipo. Durante la manutenzione tutte le API rispondono
    con il codice 503.""")),
    H(1, "8 Certificazione e passaggio in produzione"),
    P(clean("""Per ottenere le credenziali di produzione l'ente, o la software house che lo rappresenta, esegue in
    collaudo un insieme di scenari di prova: creazione di una posizione semplice e di una rateale, modifica
    dell'importo, annullamento, ricezione e verifica della firma di una notifica, scaricamento di una
    rendicontazione di più pagine. I risultati vengono caricati nel portale; il consorzio li verifica entro
    dieci giorni lavorativi e, in caso di esito positivo, rilascia le credenziali di produzione.""")),
    Sep("-"),
    P(clean("""Per domande tecniche scrivere a sviluppatori@pagofacile.example. Le segnalazioni di
    malfunzionamento dell'ambiente di produzione ricevono risposta entro quattro ore lavorative."""), "note"),
)
