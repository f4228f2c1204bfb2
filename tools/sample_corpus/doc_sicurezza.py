"""Safety procedure (A5 booklet): headings in body-size bold (no size signal), en-dash bullets with nested
items, numbered steps, hyphenated line ends, a separator line of underscores, a small table, running header
with the procedure code and centred page-number footer."""

from .elements import BLACK, DocStyle, H, HeadingStyle, NewPage, P, Sep, clean, table, ul

STYLE = DocStyle(
    stem="procedura_sicurezza_laboratorio",
    title="PRO-SIC-07 Procedura di sicurezza per il laboratorio di elettronica",
    author="Istituto Tecnico Superiore Galileo Ferraris - Servizio di prevenzione e protezione",
    subject="Procedura operativa di sicurezza", page_size="A5", margins=(46.0, 62.0, 46.0, 54.0), body_size=9.5,
    para_space=5.0,
    headings=(HeadingStyle("hebo", 9.5, BLACK, 12.0, 3.0), HeadingStyle("hebo", 9.5, BLACK, 8.0, 2.0)),
    hyphenate=True, header_lines=("PRO-SIC-07 Rev. 3 – Laboratorio di elettronica",), header_align="right",
    furniture_size=7.5, list_indent=14.0,
)

CONTENT = (
    P("Servizio di prevenzione e protezione", "cover_sub"),
    H(0, "Procedura di sicurezza per il laboratorio di elettronica"),
    P("Codice PRO-SIC-07 – Revisione 3 del 10 gennaio 2025", "cover_info"),
    P("Redatta da: RSPP – Verificata da: Responsabile di laboratorio – Approvata da: Dirigente scolastico", "cover_info"),
    NewPage(),
    H(1, "1. SCOPO"),
    P(clean("""La presente procedura stabilisce le regole di comportamento e le misure di prevenzione da
    adottare nel laboratorio di elettronica, al fine di proteggere studenti, docenti e tecnici dai rischi
    elettrici, dal rischio di incendio e dai rischi legati all'uso di saldatori e prodotti chimici. La procedura
    recepisce le indicazioni del documento di valutazione dei rischi dell'istituto, aggiornato nel dicembre
    2024.""")),
    H(1, "2. CAMPO DI APPLICAZIONE"),
    P(clean("""La procedura si applica a tutte le attività svolte nel laboratorio di elettronica, situato al
    primo piano dell'edificio B, comprese le esercitazioni didattiche, le attività dei progetti extracurricolari
    e gli interventi di manutenzione eseguiti dal personale tecnico o da ditte esterne. Gli studenti sono
    equiparati ai lavoratori durante le attività di laboratorio e sono quindi tenuti a rispettare la procedura
    come il personale.""")),
    H(1, "3. RESPONSABILITÀ"),
    ul("–",
       ("Il responsabile di laboratorio:", [
           "aggiorna l'elenco delle attrezzature e dei prodotti chimici presenti;",
           "verifica ogni mese lo stato dei dispositivi di protezione e della cassetta di primo soccorso;",
           "segnala per iscritto al dirigente le anomalie che non può risolvere direttamente."]),
       ("Il docente che conduce l'esercitazione:", [
           "illustra agli studenti i rischi specifici dell'attività prima di iniziarla;",
           "controlla che gli studenti indossino i dispositivi di protezione previsti;",
           "è l'ultimo a lasciare il laboratorio e ne verifica lo spegnimento."]),
       ("Gli studenti:", [
           "seguono le istruzioni del docente e non usano attrezzature per cui non sono stati formati;",
           "segnalano subito qualsiasi guasto, danno o situazione di pericolo."]),
    ),
    H(1, "4. RISCHI PRINCIPALI"),
    P(clean("""Il documento di valutazione dei rischi individua per il laboratorio quattro rischi principali. Il
    rischio elettrico deriva dall'uso di alimentatori, generatori di funzione e prototipi alimentati dalla rete;
    è considerato il rischio più rilevante, perché un contatto con parti in tensione a 230 V può avere
    conseguenze mortali. Il rischio di ustione è legato ai saldatori, la cui punta raggiunge temperature comprese
    tra 320 e 400 °C. Il rischio chimico riguarda le leghe per saldatura, il flussante e l'alcol isopropilico
    usato per la pulizia dei circuiti stampati. Il rischio di incendio, infine, è dovuto alla presenza di
    materiale infiammabile e di apparecchiature che possono surriscaldarsi.""")),
    P(clean("""Il livello di ciascun rischio è riassunto nella tabella seguente, dove la probabilità e il danno
    sono valutati su una scala da 1 a 4 e il livello è il loro prodotto.""")),
    table("""
        Rischio | Prob. | Danno | Livello
        Elettrico | 2 | 4 | 8 – alto
        Ustione | 3 | 2 | 6 – medio
        Chimico | 2 | 2 | 4 – medio
        Incendio | 1 | 4 | 4 – medio""", (0.34, 0.18, 0.18, 0.30)),
    H(1, "5. DISPOSITIVI DI PROTEZIONE INDIVIDUALE"),
    P(clean("""Durante le attività di laboratorio è obbligatorio indossare i dispositivi di protezione
    individuale indicati per ciascuna lavorazione. I dispositivi sono forniti dall'istituto, sono personali
    per quanto riguarda gli occhiali e devono essere riposti nell'armadio dedicato al termine
    dell'esercitazione.""")),
    ul("–",
       ("Saldatura:", ["occhiali di protezione con ripari laterali;", "camice in cotone con maniche lunghe;",
                       "aspiratore di fumi acceso a non più di 20 cm dal punto di saldatura."]),
       ("Prove su circuiti alimentati dalla rete:", ["guanti isolanti di classe 00;",
                                                     "tappetino isolante sotto il banco."]),
       ("Pulizia dei circuiti con solventi:", ["guanti in nitrile;", "occhiali di protezione."]),
    ),
    H(1, "6. NORME GENERALI DI COMPORTAMENTO"),
    P(clean("""Nel laboratorio non si mangia e non si beve, per evitare sia il contatto delle bevande con le
    apparecchiature sia l'ingestione di residui di lega saldante. Gli zaini vanno lasciati negli appositi
    scaffali all'ingresso, così che le vie di esodo restino libere. Ogni postazione può essere utilizzata al
    massimo da due studenti contemporaneamente. I capelli lunghi devono essere raccolti e non si indossano
    sciarpe o braccialetti che possano impigliarsi o toccare parti calde.""")),
    P(clean("""Prima di alimentare un circuito, lo studente chiede la verifica del docente, che controlla in
    particolare i collegamenti dell'alimentatore e la polarità dei componenti. Le prove su circuiti alimentati
    direttamente dalla tensione di rete a 230 V sono consentite solo al banco di collaudo dotato di
    trasformatore di isolamento e interruttore differenziale da 10 mA, e solo alla presenza del docente.
    Gli alimentatori da banco devono essere impostati con un limite di corrente non superiore a 1 A, salvo
    diversa indicazione scritta nella scheda dell'esercitazione.""")),
    H(1, "7. ISTRUZIONI OPERATIVE PER LA SALDATURA"),
    ul("1.",
       "Accendere l'aspiratore di fumi e verificare che funzioni.",
       "Controllare che il cavo del saldatore non sia danneggiato e che il saldatore sia appoggiato sul suo supporto.",
       "Impostare la temperatura a 350 °C per la lega senza piombo, salvo diversa indicazione.",
       "Pulire la punta sulla spugnetta inumidita o sulla lana di ottone prima di ogni saldatura.",
       "Al termine, riporre il saldatore sul supporto, spegnerlo e lasciarlo raffreddare per almeno 10 minuti prima di riporlo.",
       "Lavare le mani con acqua e sapone prima di lasciare il laboratorio."),
    P(clean("""Il saldatore non deve mai essere lasciato acceso senza sorveglianza. Se il docente deve
    allontanarsi, tutti i saldatori vengono spenti dall'interruttore generale del banco."""), "note"),
    H(1, "8. GESTIONE DELLE EMERGENZE"),
    H(2, "8.1 Infortunio elettrico"),
    P(clean("""Se una persona resta a contatto con parti in tensione, non toccarla direttamente. Premere il
    pulsante rosso di sgancio generale, che si trova accanto alla porta d'ingresso e toglie tensione a tutti i
    banchi; solo dopo prestare soccorso. Chiamare il numero unico di emergenza 112 e avvisare l'addetto al primo
    soccorso del piano, anche se l'infortunato sembra stare bene, perché gli effetti di una scossa possono
    manifestarsi nelle ore successive.""")),
    H(2, "8.2 Principio di incendio"),
    P(clean("""In caso di principio di incendio su apparecchiature elettriche, togliere tensione con il pulsante
    di sgancio e usare esclusivamente l'estintore a anidride carbonica da 5 kg posto accanto alla lavagna;
    non usare mai acqua. Se l'incendio non si spegne in pochi secondi, abbandonare il laboratorio chiudendo
    la porta, attivare il pulsante di allarme nel corridoio e raggiungere il punto di raccolta numero 3, nel
    cortile interno dell'edificio B.""")),
    H(2, "8.3 Ustioni"),
    P(clean("""Le piccole ustioni da saldatore si trattano raffreddando la parte sotto acqua corrente fresca per
    almeno dieci minuti. Non applicare ghiaccio, pomate o altri prodotti. Ogni ustione, anche lieve, viene
    annotata nel registro degli infortuni del laboratorio entro la fine della giornata.""")),
    H(1, "9. FORMAZIONE"),
    P(clean("""Gli studenti possono accedere al laboratorio solo dopo aver completato la formazione generale e
    specifica sulla sicurezza, pari complessivamente a 12 ore per gli indirizzi a rischio medio. La formazione
    specifica sul laboratorio di elettronica dura 4 ore, si conclude con un test scritto e viene ripetuta ogni
    anno con un aggiornamento di 2 ore. I docenti tengono l'elenco degli studenti che hanno superato il test,
    allegato al registro del laboratorio. Chi non supera il test può ripeterlo dopo due settimane; fino ad
    allora partecipa alle esercitazioni solo come osservatore, senza utilizzare le attrezzature.""")),
    Sep("_"),
    H(1, "10. STORIA DELLE REVISIONI"),
    ul("–",
       "Revisione 1, settembre 2019: prima emissione.",
       "Revisione 2, ottobre 2022: aggiunte le istruzioni per la saldatura senza piombo.",
       "Revisione 3, gennaio 2025: aggiornati la tabella dei rischi e il punto di raccolta."),
)
