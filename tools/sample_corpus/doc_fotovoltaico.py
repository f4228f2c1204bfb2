"""Installation manual for a photovoltaic inverter: larger bold headings, chapters on new pages, warnings in
italics, • bullets, numbered steps, a technical-data table, a dashed separator, footer with product name and
page number, and a landscape page inside a portrait document."""

from .elements import BLACK, DocStyle, H, HeadingStyle, NewPage, P, Sep, clean, table, ul

ORANGE = (0.72, 0.30, 0.0)

STYLE = DocStyle(
    stem="manuale_inverter_fotovoltaico", title="SOLARIS 6K - Manuale di installazione e manutenzione",
    author="Elettrosole Italia S.r.l.", subject="Manuale di installazione dell'inverter fotovoltaico SOLARIS 6K",
    margins=(64.0, 84.0, 64.0, 76.0), body_size=10.5, leading=1.45,
    headings=(HeadingStyle("hebo", 17.0, ORANGE, 4.0, 10.0), HeadingStyle("hebo", 12.0, BLACK, 12.0, 4.0)),
    chapter_new_page=True, header_lines=("Elettrosole Italia",), header_align="right",
    footer_left="SOLARIS 6K – Manuale di installazione – Rev. 1.4", footer_align="right",
)

CONTENT = (
    P("Elettrosole Italia S.r.l.", "cover_sub"),
    H(0, "SOLARIS 6K"),
    P("Inverter fotovoltaico monofase per impianti residenziali", "cover_sub"),
    P("Manuale di installazione e manutenzione – Revisione 1.4, giugno 2025", "cover_info"),
    P("Conservare il manuale per tutta la durata di vita del prodotto.", "cover_info"),
    NewPage(),
    H(1, "1 Avvertenze di sicurezza"),
    P(clean("""L'installazione, la messa in servizio e la manutenzione dell'inverter devono essere eseguite
    esclusivamente da installatori qualificati, in possesso dei requisiti tecnico-professionali previsti per gli
    impianti elettrici. Una installazione non conforme alle istruzioni di questo manuale fa decadere la
    garanzia e può causare danni a persone e cose.""")),
    P(clean("""Attenzione: anche dopo l'apertura del sezionatore lato corrente continua, i moduli fotovoltaici
    esposti alla luce restano in tensione. Prima di qualsiasi intervento sui cavi di stringa coprire i moduli
    oppure operare al buio, e attendere almeno 5 minuti dallo spegnimento perché i condensatori interni si
    scarichino."""), "note"),
    P(clean("""L'inverter non deve essere installato in ambienti con atmosfera esplosiva, in locali abitati
    dove il rumore di funzionamento, inferiore a 30 dB, potrebbe comunque disturbare, né in prossimità di
    materiali infiammabili. Non aprire il coperchio dell'apparecchio: all'interno non sono presenti parti
    riparabili dall'utente e l'apertura fa decadere la garanzia.""")),
    H(1, "2 Descrizione del prodotto"),
    P(clean("""SOLARIS 6K è un inverter monofase senza trasformatore che converte la corrente continua prodotta
    dai moduli fotovoltaici in corrente alternata a 230 V, 50 Hz, per l'immissione nella rete di distribuzione.
    Dispone di due inseguitori del punto di massima potenza indipendenti, così da poter collegare due stringhe
    con orientamento o numero di moduli differenti, ad esempio sulle due falde di un tetto.""")),
    P(clean("""L'inverter comunica tramite Wi-Fi integrato e porta RS485 con protocollo Modbus. Attraverso
    l'applicazione Elettrosole Monitor il proprietario può consultare la produzione istantanea, giornaliera e
    storica, mentre l'installatore può aggiornare il firmware e leggere il registro degli allarmi. I principali
    dati tecnici sono riportati nella tabella seguente.""")),
    table("""
        Parametro | Valore
        Potenza nominale in uscita | 6.000 W
        Tensione massima in ingresso | 600 V
        Intervallo di tensione MPPT | 90 – 550 V
        Corrente massima per ingresso | 16 A
        Numero di inseguitori MPPT | 2
        Efficienza massima | 97,6 %
        Grado di protezione | IP65
        Temperatura di funzionamento | da -25 a +60 °C
        Peso | 11,5 kg""", (0.62, 0.38)),
    H(1, "3 Installazione meccanica"),
    P(clean("""Scegliere un luogo di installazione riparato dalla luce diretta del sole e dalla pioggia battente,
    per esempio sotto una tettoia o sul lato nord dell'edificio. Oltre i 45 °C di temperatura ambiente
    l'inverter riduce automaticamente la potenza per proteggere i componenti; un'installazione in pieno sole
    comporta quindi una perdita di produzione nelle ore più calde. L'apparecchio va montato in verticale su una
    parete in grado di sostenerne il peso, con un'inclinazione all'indietro non superiore a 15 gradi.""")),
    P(clean("""Per garantire la corretta dissipazione del calore, intorno all'inverter devono essere lasciate
    libere le seguenti distanze minime:""")),
    ul("•",
       "30 cm sopra e sotto l'apparecchio;",
       "20 cm su ciascun lato;",
       "50 cm davanti al pannello frontale, per la lettura del display e gli interventi di manutenzione."),
    ul("1.",
       "Segnare sulla parete la posizione dei fori utilizzando la staffa come dima.",
       "Praticare quattro fori da 10 mm e inserire i tasselli forniti.",
       "Fissare la staffa con le viti e verificarne l'orizzontalità con una livella.",
       "Agganciare l'inverter alla staffa e bloccarlo con la vite di sicurezza sul lato destro."),
    H(1, "4 Collegamenti elettrici"),
    H(2, "4.1 Lato corrente continua"),
    P(clean("""Prima del collegamento verificare con un multimetro che la tensione a vuoto di ogni stringa non
    superi 600 V alla temperatura minima prevista nel luogo di installazione, e che la polarità sia corretta. Una
    polarità invertita non danneggia l'inverter, ma impedisce l'avvio e genera l'allarme E-12. Usare
    esclusivamente i connettori MC4 forniti e cavi solari con sezione compresa tra 4 e 6 mm².""")),
    H(2, "4.2 Lato corrente alternata"),
    P(clean("""Il collegamento alla rete si esegue con un cavo tripolare di sezione minima 6 mm², protetto a monte
    da un interruttore magnetotermico da 40 A con curva C. Non collegare altri carichi tra l'inverter e
    l'interruttore. Un interruttore differenziale esterno non è obbligatorio perché l'inverter integra la
    protezione contro le correnti di guasto; se le norme locali lo richiedono, usare un differenziale di tipo A
    con corrente nominale di intervento di 30 mA.""")),
    P(clean("""Il conduttore di protezione va collegato al morsetto di terra contrassegnato dal simbolo
    corrispondente prima di ogni altro collegamento. Al termine, richiudere il coperchio della morsettiera
    serrando le quattro viti con una coppia di 1,2 Nm per mantenere il grado di protezione IP65.""")),
    H(1, "5 Messa in servizio"),
    ul("1.",
       "Chiudere l'interruttore magnetotermico lato corrente alternata.",
       "Portare il sezionatore lato corrente continua in posizione ON.",
       "Attendere l'accensione del display e selezionare il paese di installazione, che determina i parametri di connessione alla rete.",
       "Verificare che il LED verde si accenda in modo fisso dopo circa 60 secondi, a indicare l'immissione in rete.",
       "Collegare l'inverter alla rete Wi-Fi dell'abitazione tramite l'applicazione Elettrosole Monitor."),
    P(clean("""Se il LED rosso lampeggia, il display mostra il codice dell'allarme: i codici più frequenti e i
    relativi rimedi sono descritti nel capitolo 6. Il paese di installazione può essere modificato solo entro le
    prime 24 ore di funzionamento; successivamente la modifica richiede la password dell'installatore.""")),
    NewPage("A4L"),
    H(1, "6 Codici di allarme"),
    table("""
        Codice | Descrizione | Causa probabile | Rimedio
        E-03 | tensione di rete fuori limiti | rete instabile o cavo sottodimensionato | verificare la sezione del cavo CA
        E-07 | isolamento insufficiente | umidità nei connettori o cavo danneggiato | controllare l'isolamento delle stringhe
        E-12 | polarità invertita | stringa collegata al contrario | invertire i connettori della stringa
        E-21 | sovratemperatura | ventilazione ostruita o sole diretto | liberare gli spazi di ventilazione
        E-30 | guasto interno | componente elettronico difettoso | contattare l'assistenza tecnica""", (0.09, 0.25, 0.33, 0.33)),
    P(clean("""Dopo aver eliminato la causa di un allarme, l'inverter si riavvia automaticamente entro cinque
    minuti. Se lo stesso allarme si ripete più di tre volte nello stesso giorno, l'inverter si blocca e deve
    essere riavviato manualmente spegnendo e riaccendendo entrambi i sezionatori.""")),
    NewPage("A4"),
    H(1, "7 Manutenzione e garanzia"),
    P(clean("""L'inverter non richiede manutenzione ordinaria complessa. Una volta all'anno è consigliabile
    controllare che le alette di raffreddamento siano pulite, che i connettori non presentino segni di
    surriscaldamento e che i cavi siano saldamente fissati. La pulizia si esegue con un panno asciutto; non
    usare acqua in pressione né solventi.""")),
    P(clean("""La garanzia standard del prodotto è di 10 anni dalla data di acquisto e può essere estesa a 15
    anni registrando il prodotto sul sito del produttore entro 90 giorni dall'installazione. La garanzia copre la
    sostituzione dell'apparecchio difettoso ma non i costi di manodopera per lo smontaggio e il rimontaggio.""")),
    Sep("-"),
    P(clean("""Assistenza tecnica Elettrosole: numero verde 800 123 456, dal lunedì al venerdì dalle 9:00 alle
    18:00; posta elettronica assistenza@elettrosole.example."""), "note"),
)
