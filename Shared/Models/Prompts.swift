import Foundation

/// A question offered to a quiet group for one newsletter period: a stable id (stored with the stories that answer it,
/// so it never changes meaning) and its text by language (ISO 639-1); every prompt has all of `Prompt.languages`.
public struct Prompt: Sendable, Equatable {
    public let id: String
    public let texts: [String: String]

    /// The languages every prompt is written in; English is the fallback.
    public static let languages = ["en", "fr", "ro", "de", "es"]

    /// The text in `language` (a language tag such as `fr-FR` or `fr_CA`, or nil), else in English.
    public func text(in language: String?) -> String {
        let code = language.map { String($0.lowercased().prefix { $0.isLetter }) }
        return code.flatMap { texts[$0] } ?? texts["en"]!
    }

    /// The prompt of `id` in the catalogue; nil for an id it does not hold.
    public static func named(_ id: String) -> Prompt? { catalogue.first { $0.id == id } }

    /// How many of a group's latest prompts the next one is never one of: with daily periods nothing comes back
    /// within 20 days, with weekly ones within 20 weeks.
    public static let noRepeatWithin = 20

    /// The prompt a group is offered for the period starting at `periodStart`, `recent` being the ids of the prompts
    /// it was offered before, latest first. The same group and period with the same history give the same prompt, so
    /// every member sees the one the group was offered; none of the latest `noRepeatWithin` comes back.
    public static func choose(group: UUID, periodStart: Date, recent: [String]) -> Prompt {
        let excluded = Set(recent.prefix(noRepeatWithin))
        let candidates = catalogue.filter { !excluded.contains($0.id) }
        let pool = candidates.isEmpty ? catalogue : candidates
        return pool[Int(seed(group: group, periodStart: periodStart) % UInt64(pool.count))]
    }

    /// FNV-1a over the group's bytes and the period's start in whole seconds: stable across processes and releases
    /// (Swift's `Hasher` is seeded per process).
    static func seed(group: UUID, periodStart: Date) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let u = group.uuid
        let bytes = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
        let seconds = UInt64(bitPattern: Int64(periodStart.timeIntervalSince1970.rounded(.down)))
        for byte in bytes + (0..<8).map({ UInt8(truncatingIfNeeded: seconds >> ($0 * 8)) }) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    private init(_ id: String, en: String, fr: String, ro: String, de: String, es: String) {
        self.id = id; texts = ["en": en, "fr": fr, "ro": ro, "de": de, "es": es]
    }

    /// The curated set. Add at the end; never reuse or rename an id (answered stories keep it).
    public static let catalogue: [Prompt] = [
        Prompt("best-moment", en: "What was the best moment of your week?", fr: "Quel a été le meilleur moment de ta semaine ?",
               ro: "Care a fost cel mai frumos moment al săptămânii tale?", de: "Was war der schönste Moment deiner Woche?",
               es: "¿Cuál fue el mejor momento de tu semana?"),
        Prompt("on-your-plate", en: "What did you eat today that you would cook again?", fr: "Qu'as-tu mangé aujourd'hui que tu cuisinerais à nouveau ?",
               ro: "Ce ai mâncat azi și ai găti din nou?", de: "Was hast du heute gegessen, das du wieder kochen würdest?",
               es: "¿Qué comiste hoy que volverías a cocinar?"),
        Prompt("window-view", en: "Show us the view from your window.", fr: "Montre-nous la vue depuis ta fenêtre.",
               ro: "Arată-ne priveliștea de la fereastra ta.", de: "Zeig uns den Blick aus deinem Fenster.",
               es: "Muéstranos la vista desde tu ventana."),
        Prompt("small-win", en: "What small win are you proud of?", fr: "De quelle petite victoire es-tu fier ?",
               ro: "Cu ce mică reușită te mândrești?", de: "Auf welchen kleinen Erfolg bist du stolz?",
               es: "¿De qué pequeño logro estás orgulloso?"),
        Prompt("listening", en: "What are you listening to these days?", fr: "Qu'écoutes-tu ces jours-ci ?",
               ro: "Ce asculți zilele acestea?", de: "Was hörst du gerade?", es: "¿Qué estás escuchando estos días?"),
        Prompt("reading", en: "What are you reading, or wish you had time to read?", fr: "Que lis-tu, ou que voudrais-tu avoir le temps de lire ?",
               ro: "Ce citești sau ce ți-ar plăcea să ai timp să citești?", de: "Was liest du, oder was würdest du gern lesen?",
               es: "¿Qué estás leyendo, o qué te gustaría tener tiempo de leer?"),
        Prompt("made-you-laugh", en: "What made you laugh recently?", fr: "Qu'est-ce qui t'a fait rire récemment ?",
               ro: "Ce te-a făcut să râzi în ultima vreme?", de: "Was hat dich zuletzt zum Lachen gebracht?",
               es: "¿Qué te hizo reír últimamente?"),
        Prompt("new-thing", en: "What did you try for the first time?", fr: "Qu'as-tu essayé pour la première fois ?",
               ro: "Ce ai încercat pentru prima dată?", de: "Was hast du zum ersten Mal ausprobiert?",
               es: "¿Qué probaste por primera vez?"),
        Prompt("walk", en: "Where did your feet take you this week?", fr: "Où tes pas t'ont-ils mené cette semaine ?",
               ro: "Unde te-au purtat pașii săptămâna aceasta?", de: "Wohin haben dich deine Füße diese Woche getragen?",
               es: "¿Adónde te llevaron tus pies esta semana?"),
        Prompt("grateful", en: "Name one thing you are grateful for today.", fr: "Cite une chose pour laquelle tu es reconnaissant aujourd'hui.",
               ro: "Numește un lucru pentru care ești recunoscător azi.", de: "Nenne eine Sache, für die du heute dankbar bist.",
               es: "Nombra algo por lo que estés agradecido hoy."),
        Prompt("desk", en: "Show us where you work or study.", fr: "Montre-nous où tu travailles ou étudies.",
               ro: "Arată-ne unde lucrezi sau înveți.", de: "Zeig uns, wo du arbeitest oder lernst.",
               es: "Muéstranos dónde trabajas o estudias."),
        Prompt("learned", en: "What did you learn this week?", fr: "Qu'as-tu appris cette semaine ?",
               ro: "Ce ai învățat săptămâna aceasta?", de: "Was hast du diese Woche gelernt?", es: "¿Qué aprendiste esta semana?"),
        Prompt("looking-forward", en: "What are you looking forward to?", fr: "Qu'attends-tu avec impatience ?",
               ro: "Ce aștepți cu nerăbdare?", de: "Worauf freust du dich?", es: "¿Qué estás esperando con ilusión?"),
        Prompt("weather", en: "What is the weather like where you are?", fr: "Quel temps fait-il chez toi ?",
               ro: "Cum e vremea pe unde ești?", de: "Wie ist das Wetter bei dir?", es: "¿Qué tiempo hace donde estás?"),
        Prompt("kind-act", en: "Who was kind to you lately?", fr: "Qui a été gentil avec toi dernièrement ?",
               ro: "Cine a fost amabil cu tine în ultima vreme?", de: "Wer war in letzter Zeit freundlich zu dir?",
               es: "¿Quién fue amable contigo últimamente?"),
        Prompt("pocket", en: "What is in your pocket or bag right now?", fr: "Qu'y a-t-il dans ta poche ou ton sac en ce moment ?",
               ro: "Ce ai acum în buzunar sau în geantă?", de: "Was ist gerade in deiner Tasche?",
               es: "¿Qué llevas ahora mismo en el bolsillo o el bolso?"),
        Prompt("morning", en: "How did your morning start?", fr: "Comment ta matinée a-t-elle commencé ?",
               ro: "Cum a început dimineața ta?", de: "Wie hat dein Morgen angefangen?", es: "¿Cómo empezó tu mañana?"),
        Prompt("favourite-spot", en: "Where is your favourite spot nearby?", fr: "Quel est ton endroit préféré près de chez toi ?",
               ro: "Care e locul tău preferat prin apropiere?", de: "Was ist dein Lieblingsort in der Nähe?",
               es: "¿Cuál es tu rincón favorito cerca de ti?"),
        Prompt("childhood", en: "Share a memory from when you were a child.", fr: "Partage un souvenir de ton enfance.",
               ro: "Împărtășește o amintire din copilărie.", de: "Teile eine Erinnerung aus deiner Kindheit.",
               es: "Comparte un recuerdo de tu infancia."),
        Prompt("hands-busy", en: "What have your hands been busy with?", fr: "À quoi tes mains se sont-elles occupées ?",
               ro: "Cu ce ți-au fost mâinile ocupate?", de: "Womit waren deine Hände beschäftigt?",
               es: "¿En qué han estado ocupadas tus manos?"),
        Prompt("challenge", en: "What was hard this week, and how did you handle it?", fr: "Qu'est-ce qui a été difficile cette semaine, et comment l'as-tu surmonté ?",
               ro: "Ce a fost greu săptămâna aceasta și cum te-ai descurcat?", de: "Was war diese Woche schwer, und wie bist du damit umgegangen?",
               es: "¿Qué fue difícil esta semana y cómo lo afrontaste?"),
        Prompt("colour", en: "Which colour caught your eye today?", fr: "Quelle couleur a attiré ton regard aujourd'hui ?",
               ro: "Ce culoare ți-a atras privirea azi?", de: "Welche Farbe ist dir heute ins Auge gefallen?",
               es: "¿Qué color te llamó la atención hoy?"),
        Prompt("recommend", en: "What would you recommend to the group?", fr: "Que recommanderais-tu au groupe ?",
               ro: "Ce i-ai recomanda grupului?", de: "Was würdest du der Gruppe empfehlen?", es: "¿Qué le recomendarías al grupo?"),
        Prompt("quiet-moment", en: "When did you have a quiet moment to yourself?", fr: "Quand as-tu eu un moment de calme pour toi ?",
               ro: "Când ai avut un moment liniștit doar pentru tine?", de: "Wann hattest du einen ruhigen Moment für dich?",
               es: "¿Cuándo tuviste un momento de calma para ti?"),
        Prompt("someone-missed", en: "Who do you miss, and why?", fr: "Qui te manque, et pourquoi ?",
               ro: "Cine îți lipsește și de ce?", de: "Wen vermisst du, und warum?", es: "¿A quién echas de menos, y por qué?"),
        Prompt("outside", en: "What did you see outside today?", fr: "Qu'as-tu vu dehors aujourd'hui ?",
               ro: "Ce ai văzut afară azi?", de: "Was hast du heute draußen gesehen?", es: "¿Qué viste fuera hoy?"),
        Prompt("plans", en: "What are your plans for the weekend?", fr: "Quels sont tes projets pour le week-end ?",
               ro: "Ce planuri ai pentru weekend?", de: "Was hast du am Wochenende vor?", es: "¿Qué planes tienes para el fin de semana?"),
        Prompt("treat", en: "How did you treat yourself lately?", fr: "Comment t'es-tu fait plaisir dernièrement ?",
               ro: "Cum te-ai răsfățat în ultima vreme?", de: "Womit hast du dir zuletzt etwas Gutes getan?",
               es: "¿Cómo te has consentido últimamente?"),
        Prompt("skill", en: "What skill are you working on?", fr: "Sur quelle compétence travailles-tu ?",
               ro: "La ce abilitate lucrezi?", de: "An welcher Fähigkeit arbeitest du gerade?", es: "¿En qué habilidad estás trabajando?"),
        Prompt("one-photo", en: "Tell your week in one photo.", fr: "Raconte ta semaine en une photo.",
               ro: "Povestește-ți săptămâna într-o fotografie.", de: "Erzähl deine Woche in einem Foto.",
               es: "Cuenta tu semana en una foto."),
    ]
}
