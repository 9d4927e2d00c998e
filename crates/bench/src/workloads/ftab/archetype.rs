//! The FTaB client archetypes, how many of each a run has, and what each needs from a target.
//!
//! Alice, Bob, Carl and Rick use plain queues. Larry needs messages addressed to one client and
//! the "which queues hold messages for me" query; Tola and Maruja need addressed messages (the
//! request goes to one Maruja, the reply to one Tola) and retrieval by sender (Tola reads its
//! reply from its Maruja, across queues). On a target without these, those archetypes cannot
//! run and the workload refuses them by name rather than run something else.

use crate::drivers::Capabilities;

use super::args::FtabArgs;

/// One archetype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Archetype {
    /// Sends to N random queues, no receiver.
    Alice,
    /// Pops the highest-priority message of a random queue.
    Bob,
    /// Bounces addressed messages, found with the waiting-queues query.
    Larry,
    /// Sends a request to its Maruja and waits for the reply.
    Tola,
    /// Answers its Tola's requests.
    Maruja,
    /// Sends requests without waiting for answers.
    Carl,
    /// Pops and drops Carl's requests.
    Rick,
}

/// Every archetype, in report order.
pub const ALL: [Archetype; 7] = [
    Archetype::Alice,
    Archetype::Bob,
    Archetype::Larry,
    Archetype::Tola,
    Archetype::Maruja,
    Archetype::Carl,
    Archetype::Rick,
];

impl Archetype {
    /// Lower-case name, as the flag.
    pub fn name(self) -> &'static str {
        match self {
            Archetype::Alice => "alice",
            Archetype::Bob => "bob",
            Archetype::Larry => "larry",
            Archetype::Tola => "tola",
            Archetype::Maruja => "maruja",
            Archetype::Carl => "carl",
            Archetype::Rick => "rick",
        }
    }

    /// Whether messages find its clients by their names (addressed to them, or taken by
    /// sender): such clients need a connection of their own, the others may share one.
    pub fn found_by_name(self) -> bool {
        matches!(self, Archetype::Larry | Archetype::Tola | Archetype::Maruja)
    }

    /// What this archetype needs that `caps` lacks, as phrases (empty: it can run).
    pub fn missing(self, caps: &Capabilities) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.found_by_name() && !caps.addressed {
            missing.push("addressed messages");
        }
        if self == Archetype::Larry && !caps.queue_query {
            missing.push("the waiting-queues query");
        }
        if matches!(self, Archetype::Tola | Archetype::Maruja) && !caps.by_sender {
            missing.push("retrieval by sender");
        }
        missing
    }
}

/// How many clients of `a` the run has.
pub fn count(args: &FtabArgs, a: Archetype) -> u32 {
    match a {
        Archetype::Alice => args.alice,
        Archetype::Bob => args.bob,
        Archetype::Larry => args.larry,
        Archetype::Tola => args.tola,
        Archetype::Maruja => args.maruja,
        Archetype::Carl => args.carl,
        Archetype::Rick => args.rick,
    }
}

/// Why the mix cannot run: no clients, unpaired Tolas and Marujas, or archetypes `target`
/// cannot run (named with what is missing). `None` when it can run.
pub fn refusal(args: &FtabArgs, target: &str, caps: &Capabilities) -> Option<String> {
    if ALL.iter().all(|&a| count(args, a) == 0) {
        return Some(
            "no clients: give a mix, e.g. --alice 50 --bob 50 (or --larry, --tola/--maruja, \
             --carl/--rick)"
                .to_string(),
        );
    }
    if args.tola != args.maruja {
        return Some(format!(
            "Tola and Maruja come in pairs: --tola {} and --maruja {} differ",
            args.tola, args.maruja
        ));
    }
    let refused: Vec<String> = ALL
        .iter()
        .filter(|&&a| count(args, a) > 0)
        .filter_map(|&a| {
            let missing = a.missing(caps);
            (!missing.is_empty()).then(|| format!("{} (needs {})", a.name(), missing.join(" and ")))
        })
        .collect();
    if refused.is_empty() {
        return None;
    }
    let runnable: Vec<&str> = ALL
        .iter()
        .filter(|a| a.missing(caps).is_empty())
        .map(|a| a.name())
        .collect();
    Some(format!(
        "target '{target}' cannot run {}; archetypes it can run: {}",
        refused.join(", "),
        runnable.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: FtabArgs,
    }

    fn args(flags: &[&str]) -> FtabArgs {
        let mut argv = vec!["ftab"];
        argv.extend_from_slice(flags);
        Cli::parse_from(argv).args
    }

    const PLAIN: Capabilities = Capabilities {
        by_sender: false,
        addressed: false,
        priorities: true,
        queue_query: false,
    };
    const FULL: Capabilities = Capabilities {
        by_sender: true,
        addressed: true,
        priorities: true,
        queue_query: true,
    };

    #[test]
    fn refusals() {
        let a = args(&["--alice", "2", "--bob", "2"]);
        assert_eq!(refusal(&a, "x", &PLAIN), None);
        let a = args(&["--larry", "3", "--tola", "1", "--maruja", "1", "--bob", "1"]);
        assert_eq!(refusal(&a, "ferry", &FULL), None);
        let why = refusal(&a, "amqp", &PLAIN).unwrap();
        assert!(why.contains("target 'amqp' cannot run larry (needs addressed messages and the waiting-queues query)"), "{why}");
        assert!(
            why.contains("tola (needs addressed messages and retrieval by sender)"),
            "{why}"
        );
        assert!(why.ends_with("it can run: alice, bob, carl, rick"), "{why}");
        assert!(!why.contains("bob ("), "{why}");
        let why = refusal(&args(&["--tola", "2", "--maruja", "1"]), "ferry", &FULL).unwrap();
        assert!(why.contains("pairs"), "{why}");
        assert!(refusal(&args(&[]), "ferry", &FULL)
            .unwrap()
            .contains("no clients"));
    }
}
