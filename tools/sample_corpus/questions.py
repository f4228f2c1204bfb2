"""Questions, oracle answers and evidence strings of the sample study."""

from __future__ import annotations

from dataclasses import dataclass

from ragstudy.scoring.groundtruth import UNANSWERABLE_ORACLE


@dataclass(frozen=True)
class Q:
    """A question; document is a PDF stem (None = not answerable); evidence strings are exact body-text substrings."""

    document: str | None
    question: str
    oracle: str
    evidence: tuple[str, ...] = ()
    tags: frozenset[str] = frozenset()


G = "manuale_software_gestionale"
A = "linee_guida_acquisti_ict"
S = "procedura_sicurezza_laboratorio"
API = "guida_api_servizi_pagamento"
C = "manuale_conservazione_digitale"
F = "manuale_inverter_fotovoltaico"
LIST = frozenset({"list"})
TABLE = frozenset({"table"})
BREAK = frozenset({"page_break"})

QUESTIONS: tuple[Q, ...] = (
    # --- GestiDoc 4, manuale utente
    Q(G, "Qual è la dimensione massima di un singolo file che si può caricare in GestiDoc 4?",
      "La dimensione massima di un singolo file è di 200 MB.",
      ("la dimensione massima di un singolo file è di 200 MB",)),
    Q(G, "Quanta memoria RAM è consigliata per il server applicativo di GestiDoc 4?",
      "Per il server applicativo sono consigliati 16 GB di RAM con 8 core (il minimo è 8 GB con 4 core).",
      ("Server applicativo | 4 core, 8 GB di RAM | 8 core, 16 GB di RAM",), TABLE),
    Q(G, "Quali sono i profili utente predefiniti di GestiDoc 4?",
      "I profili predefiniti sono quattro: amministratore, responsabile d'archivio, protocollista e operatore.",
      ("Amministratore: gestisce utenti, licenze, backup e parametri di sistema",
       "Responsabile d'archivio: definisce il titolario, crea i fascicoli",
       "Protocollista: registra la corrispondenza in entrata e in uscita",
       "Operatore: carica documenti, compila i metadati"), LIST),
    Q(G, "Cosa succede se la password temporanea dell'utente admin non viene cambiata entro 24 ore?",
      "L'account viene bloccato e la password va rigenerata dalla riga di comando del server con il comando "
      "gestidoc-admin reset-password.",
      ("se non viene cambiata entro questo termine, l'account viene bloccato e occorre rigenerarla dalla riga di "
       "comando del server con il comando gestidoc-admin reset-password",), BREAK),
    Q(G, "Quali metadati sono obbligatori in tutte le configurazioni di GestiDoc 4?",
      "Sono obbligatori l'oggetto (almeno dieci caratteri), la classificazione secondo il titolario, il fascicolo "
      "di appartenenza, la data del documento e il livello di riservatezza.",
      ("l'oggetto, di almeno dieci caratteri;", "la classificazione secondo il titolario;",
       "il fascicolo di appartenenza;", "la data del documento;",
       "il livello di riservatezza (pubblico, interno, riservato)."), LIST),
    Q(G, "Quante versioni di un documento conserva GestiDoc 4 al massimo, se il limite non viene modificato?",
      "Cinquanta versioni: è il valore predefinito, che il responsabile d'archivio può cambiare.",
      ("Il numero massimo di versioni conservate per ciascun documento è stabilito dal responsabile d'archivio e "
       "vale cinquanta se non viene modificato",), BREAK),
    Q(G, "Entro quanto tempo l'assistenza di GestiDoc prende in carico una segnalazione di blocco totale?",
      "Entro due ore lavorative.",
      ("Le segnalazioni di blocco totale vengono prese in carico entro due ore lavorative",)),
    Q(G, "A che ora viene eseguito il backup notturno di GestiDoc e per quanto tempo sono conservati i backup?",
      "Il backup viene eseguito ogni notte alle ore 2:00 e i backup sono conservati per trenta giorni.",
      ("GestiDoc esegue ogni notte alle ore 2:00 un backup completo del database",
       "I backup vengono conservati per trenta giorni")),
    Q(None, "Qual è il costo annuo della licenza di GestiDoc 4 per 25 utenti?", ""),
    # --- Linee guida acquisti ICT
    Q(A, "Entro quale data deve essere approvato il programma biennale degli acquisti ICT?",
      "Entro il 31 ottobre dell'anno che precede il biennio.",
      ("Il programma è approvato entro il 31 ottobre dell'anno che precede il biennio",)),
    Q(A, "Cosa succede a un ente che non trasmette il programma biennale degli acquisti ICT entro il termine?",
      "Non può accedere ai finanziamenti regionali per l'informatica dell'anno successivo, salvo un giustificato "
      "motivo comunicato per iscritto.",
      ("Gli enti che non trasmettono il programma entro il termine non possono accedere ai finanziamenti regionali "
       "per l'informatica dell'anno successivo, salvo un giustificato motivo comunicato per iscritto",), BREAK),
    Q(A, "Come sono ripartiti i 100 punti nel criterio dell'offerta economicamente più vantaggiosa?",
      "80 punti sono assegnati all'offerta tecnica e 20 punti all'offerta economica.",
      ("Il punteggio massimo di 100 punti è ripartito in 80 punti per l'offerta tecnica e 20 punti per l'offerta "
       "economica",)),
    Q(A, "Quale procedura si usa per un affidamento ICT stimato in 90.000 euro e in quanto tempo deve concludersi?",
      "L'affidamento diretto con tre preventivi (fascia F2), da concludere entro 60 giorni.",
      ("F2 | da 40.000 a 140.000 euro | affidamento diretto con tre preventivi | sito dell'ente | 60 giorni",),
      TABLE),
    Q(A, "Quali requisiti deve dimostrare di norma un fornitore di servizi informatici, oltre a quelli di legge?",
      "Un fatturato specifico per servizi analoghi negli ultimi tre esercizi non superiore al doppio della base di "
      "gara, la certificazione ISO/IEC 27001 se tratta dati personali, un gruppo di lavoro con almeno un "
      "professionista certificato sulla sicurezza e, per i servizi cloud, l'iscrizione nel catalogo nazionale.",
      ("a) un fatturato specifico per servizi analoghi, negli ultimi tre esercizi",
       "b) la certificazione ISO/IEC 27001",
       "c) la disponibilità di un gruppo di lavoro con almeno un professionista certificato",
       "d) per i servizi cloud, l'iscrizione del servizio offerto nel catalogo nazionale"), LIST),
    Q(A, "Entro quanto tempo il fornitore deve comunicare all'ente una violazione dei dati personali?",
      "Entro 24 ore dalla scoperta.",
      ("Il fornitore comunica all'ente ogni violazione dei dati personali entro 24 ore dalla scoperta",)),
    Q(A, "Con quanto anticipo il fornitore deve comunicare il trasferimento dei dati in un data center diverso?",
      "Con almeno sessanta giorni di anticipo.",
      ("Il fornitore documenta inoltre l'ubicazione dei data center utilizzati e comunica all'ente, con almeno "
       "sessanta giorni di anticipo, ogni trasferimento dei dati in un centro diverso",), BREAK),
    Q(A, "Quale punteggio minimo deve ottenere l'offerta tecnica per non essere esclusa?",
      "Almeno 48 punti su 80; altrimenti l'offerta è esclusa prima dell'apertura dell'offerta economica.",
      ("Un'offerta tecnica che non raggiunge almeno 48 punti su 80 viene esclusa",)),
    # --- Procedura di sicurezza
    Q(S, "Qual è il livello del rischio elettrico nel laboratorio di elettronica?",
      "Il rischio elettrico ha livello 8, alto (probabilità 2, danno 4).",
      ("Elettrico | 2 | 4 | 8 – alto",), TABLE),
    Q(S, "Quali dispositivi di protezione sono richiesti durante la saldatura?",
      "Occhiali di protezione con ripari laterali, camice in cotone con maniche lunghe e aspiratore di fumi acceso "
      "a non più di 20 cm dal punto di saldatura.",
      ("occhiali di protezione con ripari laterali;", "camice in cotone con maniche lunghe;",
       "aspiratore di fumi acceso a non più di 20 cm dal punto di saldatura."), LIST),
    Q(S, "A quale temperatura va impostato il saldatore per la lega senza piombo?",
      "A 350 °C, salvo diversa indicazione.",
      ("Impostare la temperatura a 350 °C per la lega senza piombo",)),
    Q(S, "Dove si trova il punto di raccolta da raggiungere in caso di incendio nel laboratorio?",
      "È il punto di raccolta numero 3, nel cortile interno dell'edificio B.",
      ("raggiungere il punto di raccolta numero 3, nel cortile interno dell'edificio B",)),
    Q(S, "Quale estintore si deve usare per un principio di incendio su apparecchiature elettriche?",
      "Solo l'estintore ad anidride carbonica da 5 kg accanto alla lavagna, dopo aver tolto tensione; mai acqua.",
      ("usare esclusivamente l'estintore a anidride carbonica da 5 kg posto accanto alla lavagna",)),
    Q(S, "Quanto dura la formazione specifica sul laboratorio di elettronica?",
      "Dura 4 ore, si conclude con un test scritto e ogni anno prevede un aggiornamento di 2 ore.",
      ("La formazione specifica sul laboratorio di elettronica dura 4 ore",)),
    Q(S, "Quale limite di corrente va impostato sugli alimentatori da banco?",
      "Un limite non superiore a 1 A, salvo diversa indicazione scritta nella scheda dell'esercitazione.",
      ("impostati con un limite di corrente non superiore a 1 A",)),
    Q(None, "Quante ore di formazione servono per lavorare nel laboratorio di chimica dell'istituto?", ""),
    # --- Guida API PagoFacile
    Q(API, "Per quanto tempo è valido un token di accesso delle API PagoFacile?",
      "Per 3600 secondi, cioè un'ora.",
      ("Il token di accesso ha una validità di 3600 secondi",)),
    Q(API, "Quali campi sono obbligatori per creare una posizione debitoria con le API PagoFacile?",
      "idPosizione, debitore, importo (in centesimi), causale, scadenza e codiceTributo.",
      ("idPosizione: identificativo univoco assegnato dal gestionale", "debitore: codice fiscale o partita IVA",
       "importo: in centesimi di euro", "causale: testo libero di al massimo 140 caratteri",
       "scadenza: data nel formato AAAA-MM-GG", "codiceTributo: il codice del servizio"), LIST),
    Q(API, "Quante volte viene ritrasmessa una notifica di pagamento non confermata, e a quali intervalli?",
      "Fino a cinque volte, dopo 1, 5, 15, 60 e 240 minuti.",
      ("la notifica viene ritrasmessa fino a cinque volte, dopo 1, 5, 15, 60 e 240 minuti",)),
    Q(API, "Che cosa indica il codice HTTP 429 restituito dalle API PagoFacile e cosa bisogna fare?",
      "Indica troppe richieste: bisogna attendere il numero di secondi indicato nell'intestazione Retry-After.",
      ("429 | troppe richieste | attendere", "il servizio risponde con il codice 429 e l'intestazione Retry-After"),
      TABLE),
    Q(API, "Quali scenari di prova bisogna eseguire in collaudo per ottenere le credenziali di produzione?",
      "Creazione di una posizione semplice e di una rateale, modifica dell'importo, annullamento, ricezione e "
      "verifica della firma di una notifica, scaricamento di una rendicontazione di più pagine.",
      ("creazione di una posizione semplice e di una rateale, modifica dell'importo, annullamento, ricezione e "
       "verifica della firma di una notifica, scaricamento di una rendicontazione di più pagine",), BREAK),
    Q(API, "Fino a quando resterà disponibile la versione 1 delle API PagoFacile?",
      "Fino al 31 dicembre 2025.",
      ("La versione 2 sostituisce la versione 1, che resterà disponibile fino al 31 dicembre 2025",)),
    Q(API, "Quante richieste al minuto può eseguire ogni client verso le API PagoFacile?",
      "Al massimo 100 richieste al minuto.",
      ("Ogni client può eseguire al massimo 100 richieste al minuto verso le API",)),
    Q(None, "Quale tasso di interesse si applica ai pagamenti rateali gestiti da PagoFacile?", ""),
    # --- Manuale di conservazione
    Q(C, "Entro quando va versato in conservazione il registro giornaliero di protocollo e per quanto è conservato?",
      "Entro il giorno successivo; è conservato senza limiti di tempo.",
      ("Registro giornaliero di protocollo | entro il giorno successivo | illimitata",), TABLE),
    Q(C, "Per quanto tempo sono conservate le fatture elettroniche del Comune di Valfiorita?",
      "Per 10 anni.",
      ("Fatture elettroniche | entro 90 giorni | 10 anni",), TABLE),
    Q(C, "Quali formati sono ammessi nel sistema di conservazione del Comune di Valfiorita?",
      "PDF/A per documenti testuali e immagini di documenti, XML per dati strutturati e fatture, TIFF e JPEG per "
      "fotografie e planimetrie, ODF per i fogli di calcolo modificabili.",
      ("I formati ammessi sono PDF/A per i documenti testuali e le immagini di documenti, XML per i dati "
       "strutturati e le fatture, TIFF e JPEG per le fotografie e le planimetrie, ODF per i fogli di calcolo",)),
    Q(C, "Quali metadati minimi accompagnano ogni documento versato in conservazione?",
      "Identificativo univoco e persistente, data di chiusura, oggetto, soggetti che hanno formato il documento, "
      "impronta SHA-256, classificazione e fascicolo.",
      ("a) identificativo univoco e persistente;", "b) data di chiusura del documento;", "c) oggetto;",
       "d) soggetti che hanno formato il documento (autore, mittente, destinatario);",
       "e) impronta crittografica del documento, calcolata con l'algoritmo SHA-256;",
       "f) classificazione e fascicolo di appartenenza."), LIST),
    Q(C, "A che distanza si trovano i due data center che conservano le copie dei pacchetti di archiviazione?",
      "A oltre 200 chilometri l'uno dall'altro.",
      ("in due data center situati a oltre 200 chilometri di distanza l'uno dall'altro",)),
    Q(C, "Entro quanto tempo deve essere ripristinato il servizio di conservazione in caso di guasto grave?",
      "Entro 48 ore.",
      ("un piano di continuità operativa che prevede il ripristino del servizio entro 48 ore in caso di guasto "
       "grave",)),
    Q(C, "Quanti documenti può contenere al massimo un pacchetto di versamento?",
      "Al massimo 1.000 documenti.",
      ("ciascuno con al massimo 1.000 documenti",)),
    Q(C, "Ogni quanto tempo deve essere aggiornato il manuale di conservazione?",
      "Almeno ogni due anni e comunque entro novanta giorni da ogni modifica rilevante.",
      ("Il manuale è aggiornato dal responsabile della conservazione almeno ogni due anni e comunque entro novanta "
       "giorni da ogni modifica rilevante",)),
    # --- Manuale inverter SOLARIS 6K
    Q(F, "Qual è la tensione massima in ingresso dell'inverter SOLARIS 6K?",
      "600 V.",
      ("Tensione massima in ingresso | 600 V",), TABLE),
    Q(F, "Quali distanze minime vanno lasciate libere intorno all'inverter SOLARIS 6K?",
      "30 cm sopra e sotto, 20 cm su ciascun lato e 50 cm davanti al pannello frontale.",
      ("30 cm sopra e sotto l'apparecchio;", "20 cm su ciascun lato;",
       "50 cm davanti al pannello frontale"), LIST),
    Q(F, "Cosa indica l'allarme E-07 dell'inverter e come si risolve?",
      "Indica isolamento insufficiente, dovuto a umidità nei connettori o a un cavo danneggiato: bisogna "
      "controllare l'isolamento delle stringhe.",
      ("E-07 | isolamento insufficiente | umidità nei connettori o cavo danneggiato | controllare l'isolamento "
       "delle stringhe",), TABLE),
    Q(F, "Quale interruttore deve proteggere a monte il collegamento dell'inverter alla rete?",
      "Un interruttore magnetotermico da 40 A con curva C.",
      ("protetto a monte da un interruttore magnetotermico da 40 A con curva C",)),
    Q(F, "Quanto dura la garanzia dell'inverter SOLARIS 6K e come si può estendere?",
      "Dura 10 anni dall'acquisto e si estende a 15 anni registrando il prodotto sul sito del produttore entro 90 "
      "giorni dall'installazione.",
      ("La garanzia standard del prodotto è di 10 anni dalla data di acquisto e può essere estesa a 15 anni "
       "registrando il prodotto sul sito del produttore entro 90 giorni dall'installazione",)),
    Q(F, "Quanto bisogna attendere dopo lo spegnimento prima di intervenire sui cavi di stringa?",
      "Almeno 5 minuti, perché i condensatori interni si scarichino.",
      ("attendere almeno 5 minuti dallo spegnimento perché i condensatori interni si scarichino",)),
    Q(F, "Quali sono i passi per la messa in servizio dell'inverter SOLARIS 6K?",
      "Chiudere il magnetotermico lato CA, portare il sezionatore CC su ON, selezionare il paese di installazione "
      "sul display, verificare che il LED verde resti acceso fisso dopo circa 60 secondi e collegare l'inverter "
      "al Wi-Fi con l'applicazione Elettrosole Monitor.",
      ("1. Chiudere l'interruttore magnetotermico lato corrente alternata.",
       "2. Portare il sezionatore lato corrente continua in posizione ON.",
       "3. Attendere l'accensione del display e selezionare il paese di installazione",
       "4. Verificare che il LED verde si accenda in modo fisso dopo circa 60 secondi",
       "5. Collegare l'inverter alla rete Wi-Fi dell'abitazione"), LIST),
    Q(None, "Qual è il prezzo di listino dell'inverter SOLARIS 6K?", ""),
)
