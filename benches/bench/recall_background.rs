//! Background sessions for the recall-quality section: deterministic, generated from word pools
//! of a developer's day (tools, tasks, errors, the same people, projects and folders as the
//! written sessions), so that the evaluation's vocabulary recurs in many exchanges that do not
//! answer its questions and a ranking has to rank. Never built from the written exchanges, which
//! would copy answers into sessions the evidence does not name.

use std::collections::HashSet;

use super::recall_quality::{Exchange, Session};

const TOOLS: &[&str] = &[
    "docker",
    "kubectl",
    "terraform",
    "cargo",
    "npm",
    "git",
    "postgres",
    "redis",
    "nginx",
    "github actions",
    "pytest",
    "jest",
    "webpack",
    "vite",
    "gradle",
    "xcode",
    "helm",
    "prometheus",
    "grafana",
    "sentry",
    "sqlx",
    "tokio",
    "react",
    "airflow",
    "kafka",
    "s3",
];
const TASKS: &[&str] = &[
    "rotate the logs",
    "bump the version",
    "squash the commits",
    "cache the dependencies",
    "add a health check",
    "paginate the results",
    "retry the request",
    "set a timeout",
    "rename the column",
    "debounce the input",
    "parse the date",
    "upload the artifact",
    "pin the version",
    "mock the clock",
    "profile the startup",
    "shard the tests",
    "seed the database",
    "enable tls",
    "compress the response",
    "validate the payload",
    "migrate the schema",
    "run the linter",
    "split the bundle",
    "index the column",
    "batch the writes",
    "fix the flaky test",
    "speed up the build",
    "decide on the queue",
    "move the config",
    "clean up the login flow",
    "review the pull request",
    "pick a library",
];
const ERRORS: &[&str] = &[
    "connection refused",
    "permission denied",
    "timeout after 30s",
    "no space left on device",
    "certificate has expired",
    "module not found",
    "out of memory",
    "deadlock detected",
    "too many open files",
    "401 unauthorized",
    "segmentation fault",
    "address already in use",
    "unexpected end of file",
    "invalid token",
    "429 too many requests",
    "exit code 137",
];
const PEOPLE: &[&str] =
    &["Priya", "Marco", "Jun", "Lena", "Tomás", "Aisha", "Dev", "Olu", "Kenji", "Sofia"];
const PROJECTS: &[&str] = &[
    "billing service",
    "mobile app",
    "httpkit client",
    "dashboard",
    "pipeline",
    "infra repo",
    "search page",
    "onboarding flow",
    "admin panel",
    "notifications worker",
];
const COMPONENTS: &[&str] = &[
    "config",
    "cache",
    "client",
    "server",
    "proxy",
    "queue",
    "worker",
    "scheduler",
    "database",
    "test runner",
    "login page",
    "retry policy",
    "migration",
    "deploy script",
    "api gateway",
];
/// Projects only the background talks about, for decisions that are near misses of the written
/// ones (the same people choosing, for something else).
const OTHER_PROJECTS: &[&str] = &[
    "partner api",
    "status page",
    "reporting tool",
    "feature flags service",
    "audit log",
    "pricing page",
    "export service",
    "webhooks gateway",
    "internal wiki",
    "sandbox environment",
];
/// What gets chosen; the written sessions' own choices are left out, so no background exchange
/// answers a question by accident.
const CHOICES: &[&str] = &[
    "MySQL",
    "SQLite",
    "DynamoDB",
    "MongoDB",
    "Redis",
    "Kafka",
    "RabbitMQ",
    "NATS",
    "BigQuery",
    "Snowflake",
    "Elasticsearch",
    "OpenSearch",
    "Typesense",
    "Datadog",
    "Honeycomb",
    "esbuild",
    "Cypress",
    "Vitest",
    "actix",
    "tonic",
    "GraphQL",
    "Temporal",
    "Celery",
    "Nomad",
    "Pulumi",
    "Auth0",
    "Keycloak",
    "Mailgun",
    "Chart.js",
    "Recharts",
];
/// The nouns of the written sessions' subjects, so that their words recur in the background.
const NOUNS: &[&str] = &[
    "invoice",
    "customer",
    "partition",
    "token",
    "certificate",
    "notification",
    "queue",
    "dashboard",
    "chart",
    "migration",
    "index",
    "report",
    "event",
    "session",
    "webhook",
    "email",
    "push",
    "cache",
    "deploy",
    "alert",
    "bundle",
    "schema",
    "backup",
    "lock",
    "build",
    "release",
    "timeout",
    "retry",
    "breaker",
    "endpoint",
    "table",
    "column",
    "test",
    "crash",
    "login",
    "password",
    "secret",
    "consumer",
    "topic",
    "pipeline",
    "job",
    "backfill",
    "pool",
    "connection",
    "policy",
    "key",
    "limit",
    "memory",
    "startup",
    "theme",
    "search",
    "article",
];
const FOLDERS: &[&str] = &[
    "/home/sam/src/billing",
    "/home/sam/src/mobile-app",
    "/home/sam/src/httpkit",
    "/home/sam/src/infra",
    "/home/sam/src/pipeline",
    "/home/sam/src/dashboard",
    "/home/sam/notes",
    "/home/sam",
    "/tmp",
];
const ENGINES: &[&str] = &["claude", "gemini", "codex", "plain"];

/// A deterministic stream of choices (xorshift), the same every run, and the written sessions'
/// words to choose from.
struct Dice(u64, Vec<String>);

impl Dice {
    /// A subject word: from the pool, or as often one of the written sessions' own words
    /// (drawn as often as they are used there), so that a question's rarer words also turn up
    /// in exchanges that do not answer it.
    fn noun(&mut self) -> String {
        if self.below(2) == 0 || self.1.is_empty() {
            return self.pick(NOUNS).to_string();
        }
        let i = self.below(self.1.len());
        self.1[i].clone()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, pool: &[&'a str]) -> &'a str {
        pool[self.below(pool.len())]
    }
}

/// `count` sessions dated September to November 2026, with ids none of `written` has.
pub(crate) fn background_sessions(written: &[Session], count: usize) -> Vec<Session> {
    let mut dice = Dice(0x2545_f491_4f6c_dd1d, vocabulary(written));
    let mut taken: HashSet<String> = written.iter().map(|s| s.id.clone()).collect();
    let mut sessions = Vec::new();
    while sessions.len() < count {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 9, 1).unwrap()
            + chrono::Days::new(dice.below(87) as u64);
        let (hour, minute, second) = (8 + dice.below(11), dice.below(60), 1 + dice.below(59));
        let id = format!("{}-{hour:02}{minute:02}{second:02}", day.format("%Y%m%d"));
        if !taken.insert(id.clone()) {
            continue;
        }
        let exchanges = (0..2 + dice.below(7))
            .map(|n| Exchange {
                at: format!(
                    "{}T{hour:02}:{:02}:{second:02}Z",
                    day.format("%Y-%m-%d"),
                    (minute + 3 * n) % 60
                ),
                question: question(&mut dice),
                answer: answer(&mut dice),
            })
            .collect();
        sessions.push(Session {
            id,
            name: None,
            folder: dice.pick(FOLDERS).to_string(),
            engine: dice.pick(ENGINES).to_string(),
            exchange: exchanges,
        });
    }
    sessions
}

/// Every word of five letters or more in the written exchanges, once per use, but for the
/// function words that long.
fn vocabulary(written: &[Session]) -> Vec<String> {
    const COMMON: &[&str] = &[
        "there", "which", "these", "those", "about", "would", "should", "could", "their", "other",
        "after", "before", "every", "where", "while", "first", "since", "still", "without",
        "because", "through", "being", "until", "again", "never", "always",
    ];
    let mut words = Vec::new();
    for exchange in written.iter().flat_map(|s| &s.exchange) {
        let text = format!("{} {}", exchange.question, exchange.answer).to_lowercase();
        for word in text.split(|c: char| !c.is_ascii_alphabetic()) {
            if word.len() >= 5 && !COMMON.contains(&word) {
                words.push(word.to_string());
            }
        }
    }
    words
}

fn question(d: &mut Dice) -> String {
    let (tool, task, error) = (d.pick(TOOLS), d.pick(TASKS), d.pick(ERRORS));
    let (person, project, component) = (d.pick(PEOPLE), d.pick(PROJECTS), d.pick(COMPONENTS));
    match d.below(10) {
        0 => format!("how do I {task} with {tool}?"),
        1 => format!("{tool} fails with `{error}` when I {task}. Any idea why?"),
        2 => format!("{person} asked me to {task} in the {project}. Where do I start?"),
        3 => format!(
            "what's the difference between {tool} and {} for the {component}?",
            d.pick(TOOLS)
        ),
        4 => format!(
            "can you review this {component} change for the {project}?\n\n```\n{}\n```",
            code(d)
        ),
        5 => format!(
            "{person} picked {} for the {} {}. Can you write the setup?",
            d.pick(CHOICES),
            d.pick(OTHER_PROJECTS),
            d.noun()
        ),
        6 => format!("the {} test in the {project} is flaky again: `{error}`. Ideas?", d.noun()),
        7 => format!(
            "should we move the {} {} into the {component}? {person} thinks so.",
            d.noun(),
            d.noun()
        ),
        8 => format!("why is the {} {} so slow in the {project}?", d.noun(), d.noun()),
        _ => format!(
            "we decided to {task} last week; now the {component} says `{error}`. Should we undo it?"
        ),
    }
}

fn answer(d: &mut Dice) -> String {
    let mut parts = Vec::new();
    for _ in 0..3 + d.below(7) {
        let (tool, task, error) = (d.pick(TOOLS), d.pick(TASKS), d.pick(ERRORS));
        let (person, project, component) = (d.pick(PEOPLE), d.pick(PROJECTS), d.pick(COMPONENTS));
        parts.push(match d.below(10) {
            0 => format!("Start by checking the {component}: most of the time `{error}` means it is misconfigured, not broken."),
            1 => format!("In {tool} you {task} with a single setting; put it in the {component} so the {project} picks it up everywhere."),
            2 => format!("```\n{}\n```", code(d)),
            3 => format!("$ {tool} --verbose\nerror: {error}\n  hint: {task} first, then run it again"),
            4 => format!("If {person} owns the {project}, ask before you {task}: the {component} is shared with other teams."),
            5 => format!("- {task}\n- check the {component}\n- watch for `{error}` in the logs"),
            6 => format!("The usual fix is to {task}; the {component} then stops timing out and the test is no longer flaky."),
            7 => format!("{person} decided to use {} for the {} {} after comparing it with {}.", d.pick(CHOICES), d.pick(OTHER_PROJECTS), d.noun(), d.pick(CHOICES)),
            8 => format!("The {} {} was fixed by moving the {} into the {component}; it had failed with `{error}` since the last {}.", d.noun(), d.noun(), d.noun(), d.noun()),
            9 => format!("For the {}, keep the {} in the {component} and the {} per {}: it is simpler to test and to deploy.", d.pick(OTHER_PROJECTS), d.noun(), d.noun(), d.noun()),
            _ => format!("Both work. {tool} is simpler for the {project}; {} scales better if the {component} grows.", d.pick(TOOLS)),
        });
    }
    parts.join("\n\n")
}

fn code(d: &mut Dice) -> String {
    let (component, task) = (d.pick(COMPONENTS), d.pick(TASKS));
    let name =
        format!("{}_{}", component.replace(' ', "_"), task.split(' ').next().unwrap_or("do"));
    format!(
        "fn {name}(ctx: &Context) -> Result<()> {{\n    // {task}\n    ctx.{}.call(Duration::from_secs({}))?;\n    Ok(())\n}}",
        component.replace(' ', "_"),
        1 + d.below(60)
    )
}
