//! Built-in scenarios reproducing the paper's figures. A built-in is one or several
//! runs (a sweep), each a scenario file from `sim/scenarios/` plus overrides.

use super::error::ScenarioError;
use super::load::{parse, Override};
use super::schema::Scenario;

/// A built-in scenario.
#[derive(Clone, Debug)]
pub struct Builtin {
    /// Name for `--builtin`.
    pub name: &'static str,
    /// One line for `--list`.
    pub about: &'static str,
    runs: Vec<RunTemplate>,
}

#[derive(Clone, Debug)]
struct RunTemplate {
    label: String,
    /// Position on a sweep's axis, and the line it belongs to.
    sweep: Option<SweepPoint>,
    file: &'static str,
    text: &'static str,
    overrides: Vec<String>,
}

/// One run of a built-in, ready to simulate.
#[derive(Clone, Debug)]
pub struct BuiltinRun {
    /// Label of the run within the built-in (`scheduler=on extra=5us`).
    pub label: String,
    /// The scenario, with the built-in's and the user's overrides applied.
    pub scenario: Scenario,
    /// Where the run sits in a sweep (`None` for a single run).
    pub sweep: Option<SweepPoint>,
}

/// One point of a sweep: a line of a plot and a position on its axis.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// The swept parameter (`extra delay (us)`).
    pub axis: &'static str,
    /// Its value in this run.
    pub x: f64,
    /// The line the run belongs to (`scheduler on`).
    pub series: String,
    /// `x` is a delay difference in us: plots add eq. (3)'s estimate of the maximum
    /// OOD, R x dD, with R the throughput per receiving NIC (paper §3.3).
    pub eq3: bool,
}

const FIG9_HOMO: &str = include_str!("../../scenarios/fig9-homo.toml");
const FIG9_HETERO: &str = include_str!("../../scenarios/fig9-hetero.toml");
const FIG4: &str = include_str!("../../scenarios/fig4.toml");
const FIG18: &str = include_str!("../../scenarios/fig18.toml");
const FIG19: &str = include_str!("../../scenarios/fig19.toml");
const FIG20: &str = include_str!("../../scenarios/fig20.toml");
const CLOS320: &str = include_str!("../../scenarios/clos320-permutation.toml");
const CLOS320_ALLTOALL: &str = include_str!("../../scenarios/clos320-alltoall.toml");
const FIG10_INCAST: &str = include_str!("../../scenarios/fig10-incast.toml");
const FIG10_PERMUTATION: &str = include_str!("../../scenarios/fig10-permutation.toml");
const FIG10_ALLTOALL: &str = include_str!("../../scenarios/fig10-alltoall.toml");
const FIG13_BANDWIDTH: &str = include_str!("../../scenarios/fig13-bandwidth.toml");
const FIG13_DELAY: &str = include_str!("../../scenarios/fig13-delay.toml");
const FIG13_BACKGROUND: &str = include_str!("../../scenarios/fig13-background.toml");
const FIG14: &str = include_str!("../../scenarios/fig14-incast-background.toml");
const FIG15: &str = include_str!("../../scenarios/fig15-loss.toml");
const INCAST32: &str = include_str!("../../scenarios/incast32.toml");
const CLOS3_RTT_FAIRNESS: &str = include_str!("../../scenarios/clos3-rtt-fairness.toml");
const FIG11: &str = include_str!("../../scenarios/fig11-moe-step.toml");
const FIG24: &str = include_str!("../../scenarios/fig24-rc-reorder.toml");
const HOST_STALLS: &str = include_str!("../../scenarios/host-stalls.toml");

/// The mean stall lengths of the `host-stalls` sweep, ms (0: none).
pub const HOST_STALL_MS: [u32; 6] = [0, 1, 2, 3, 4, 6];

/// The series of the `host-stalls` sweep, in order: name and override.
pub const HOST_STALL_SERIES: [(&str, Option<&str>); 4] = [
    ("rondo", None),
    (
        "rondo, stall allowance 4 ms",
        Some("transport.stall_allowance_us=4000"),
    ),
    (
        "rondo, stall allowance 8 ms",
        Some("transport.stall_allowance_us=8000"),
    ),
    ("rrps", Some("transport.kind=rrps")),
];

/// The `host-stalls` runs: each series of [`HOST_STALL_SERIES`] at each mean stall
/// length.
fn host_stalls() -> Vec<RunTemplate> {
    let mut runs = Vec::new();
    for (series, set) in HOST_STALL_SERIES {
        for ms in HOST_STALL_MS {
            let mut overrides = vec![format!("host.stall_us={}", ms * 1000)];
            overrides.extend(set.map(str::to_owned));
            runs.push(RunTemplate {
                label: format!("{series} stall={ms}ms"),
                sweep: Some(SweepPoint {
                    axis: "mean host stall (ms), one every 20 ms",
                    x: f64::from(ms),
                    series: series.to_owned(),
                    eq3: false,
                }),
                file: "host-stalls.toml",
                text: HOST_STALLS,
                overrides,
            });
        }
    }
    runs
}
const HETERO_BUFFER: &str = include_str!("../../scenarios/hetero-buffer.toml");

/// The shared reorder-buffer sizes of the `hetero-buffer` sweep, KB.
pub const HETERO_BUFFER_KB: [u32; 9] = [32, 48, 64, 96, 128, 200, 300, 600, 1200];

/// The `hetero-buffer` runs: one flow over 40/25/10 Gb/s paths, each buffer size.
fn hetero_buffer() -> Vec<RunTemplate> {
    HETERO_BUFFER_KB
        .iter()
        .map(|kb| RunTemplate {
            label: format!("buffer={kb}KB"),
            sweep: Some(SweepPoint {
                axis: "shared reorder buffer (KB)",
                x: f64::from(*kb),
                series: "one flow".to_owned(),
                eq3: false,
            }),
            file: "hetero-buffer.toml",
            text: HETERO_BUFFER,
            overrides: vec![format!("transport.reorder_buffer_kb={kb}")],
        })
        .collect()
}

/// The OODs the Fig. 24 sweep imposes, packets: path 1's extra delay in the
/// data's direction is this many packet times at the host rate.
pub const FIG24_OOD: [u32; 17] = [
    0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800,
];

/// Where a Fig. 24 curve's cliff starts: the last imposed OOD (points
/// `(ood, throughput)` in increasing OOD) before the first whose throughput is
/// below 97% of the first point's, the largest OOD the limit still absorbs;
/// `None` when no point falls below (or the first does, trivially).
pub fn fig24_cliff(points: &[(f64, f64)]) -> Option<f64> {
    let (_, top) = *points.first()?;
    let below = points.iter().position(|&(_, t)| t < 0.97 * top)?;
    below.checked_sub(1).map(|i| points[i].0)
}

/// The Fig. 24 runs: `rc-sr` WRITE and READ under each imposed OOD.
fn fig24() -> Vec<RunTemplate> {
    // One 4144-byte packet at 40 Gb/s (the scenario's mtu and host rate), us.
    let packet_us = 4144.0 * 8.0 / 40e3;
    let mut runs = Vec::new();
    for (op, link) in [("write", "path_forward"), ("read", "path_reverse")] {
        for ood in FIG24_OOD {
            let delay = 5.0 + f64::from(ood) * packet_us;
            runs.push(RunTemplate {
                label: format!("{op} ood={ood}"),
                sweep: Some(SweepPoint {
                    axis: "imposed OOD (packets)",
                    x: f64::from(ood),
                    series: op.to_uppercase(),
                    eq3: false,
                }),
                file: "fig24-rc-reorder.toml",
                text: FIG24,
                overrides: vec![
                    format!("workload.op={op:?}"),
                    format!(
                        "events=[{{ at_us = 0.0, link = {link:?}, index = 1, action = \"delay\", delay_us = {delay} }}]"
                    ),
                ],
            });
        }
    }
    runs
}

/// Extra one-way delays of spine path 3 in the Fig. 4 sweep, us.
pub const FIG4_EXTRA_US: [u32; 6] = [0, 5, 10, 15, 20, 25];

fn one(label: &str, file: &'static str, text: &'static str, overrides: &[&str]) -> RunTemplate {
    RunTemplate {
        label: label.to_owned(),
        sweep: None,
        file,
        text,
        overrides: overrides.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Every built-in, in `--list` order.
pub fn builtins() -> Vec<Builtin> {
    let homo = || one("", "fig9-homo.toml", FIG9_HOMO, &[]);
    let hetero = || one("", "fig9-hetero.toml", FIG9_HETERO, &[]);
    let on_off = |file: &'static str, text: &'static str| {
        vec![
            one("scheduler=on", file, text, &["transport.scheduler=true"]),
            one("scheduler=off", file, text, &["transport.scheduler=false"]),
        ]
    };
    let mut fig4 = Vec::new();
    for scheduler in ["on", "off"] {
        for extra in FIG4_EXTRA_US {
            fig4.push(RunTemplate {
                label: format!("scheduler={scheduler} extra={extra}us"),
                sweep: Some(SweepPoint {
                    axis: "extra one-way delay of spine path 3 (us)",
                    x: f64::from(extra),
                    series: format!("scheduler {scheduler}"),
                    eq3: true,
                }),
                file: "fig4.toml",
                text: FIG4,
                overrides: vec![
                    format!("transport.scheduler={}", scheduler == "on"),
                    format!("topology.extra_delay_us=[0.0, 0.0, 0.0, {extra}.0]"),
                ],
            });
        }
    }
    let mut fig10 = Vec::new();
    for os in [1, 4] {
        for (what, file, text) in [
            ("incast", "fig10-incast.toml", FIG10_INCAST),
            ("permutation", "fig10-permutation.toml", FIG10_PERMUTATION),
            ("all-to-all", "fig10-alltoall.toml", FIG10_ALLTOALL),
        ] {
            fig10.push(RunTemplate {
                label: format!("{what} OS{os}"),
                sweep: None,
                file,
                text,
                overrides: vec![format!("topology.oversubscription={os}")],
            });
        }
    }
    vec![
        Builtin {
            name: "fig9",
            about: "Fig. 9 testbed, both runs: 4 paths of 25/20/15/10 Gb/s, homo and hetero delay",
            runs: vec![homo(), hetero()],
        },
        Builtin {
            name: "fig9-homo",
            about:
                "Fig. 9 testbed: 4 paths of 25/20/15/10 Gb/s, 20 us base RTT (paper: 68.18 Gb/s)",
            runs: vec![homo()],
        },
        Builtin {
            name: "fig9-hetero",
            about: "Fig. 9 testbed with 10 us extra one-way delay on path 0 (paper: 68.14 Gb/s)",
            runs: vec![hetero()],
        },
        Builtin {
            name: "fig4",
            about: "Fig. 4 sweep: one spine path's extra delay 0-25 us, scheduler on and off",
            runs: fig4,
        },
        Builtin {
            name: "fig18",
            about: "Fig. 18: 8 flows to one receiver, 32 join at 500 us and leave at 1000 us",
            runs: vec![one("", "fig18.toml", FIG18, &[])],
        },
        Builtin {
            name: "fig19",
            about: "Fig. 19: 16 senders to 4 receivers on the Fig. 2 topology (queue difference)",
            runs: vec![one("", "fig19.toml", FIG19, &[])],
        },
        Builtin {
            name: "fig20",
            about: "Fig. 20: a path's delay grows mid-transfer, scheduler on and off",
            runs: on_off("fig20.toml", FIG20),
        },
        Builtin {
            name: "fig10",
            about: "Fig. 10: incast, permutation and all-to-all on the 320-host Clos at 1:1 and 4:1",
            runs: fig10,
        },
        Builtin {
            name: "fig13",
            about: "Fig. 13: the Fig. 10 permutation with 10% of links slowed, 10% delayed, or background flows",
            runs: vec![
                one("bandwidth", "fig13-bandwidth.toml", FIG13_BANDWIDTH, &[]),
                one("delay", "fig13-delay.toml", FIG13_DELAY, &[]),
                one("background", "fig13-background.toml", FIG13_BACKGROUND, &[]),
            ],
        },
        Builtin {
            name: "fig14",
            about: "Fig. 14: 4-to-1 incast with 16 background flows on the 4:1 Clos (sweep the reorder buffer)",
            runs: vec![one("", "fig14-incast-background.toml", FIG14, &[])],
        },
        Builtin {
            name: "hetero-buffer",
            about: "one flow over 40/25/10 Gb/s paths (1/3/15 us) against the reorder-buffer size, 32 KB-1.2 MB",
            runs: hetero_buffer(),
        },
        Builtin {
            name: "host-stalls",
            about: "the real-datapath testbed (4 paths of 250/200/150/100 Mb/s, 2 ms) with hosts stalling 0-6 ms every 20 ms: rondo, rondo with stall allowances of 4 and 8 ms, rrps",
            runs: host_stalls(),
        },
        Builtin {
            name: "fig15",
            about: "Fig. 15/16: the Fig. 10 permutation under 0.1% random loss at every switch egress",
            runs: vec![one("", "fig15-loss.toml", FIG15, &[])],
        },
        Builtin {
            name: "fig17",
            about: "Fig. 17: 32-to-1 incast of long flows on the 320-host Clos (per-flow fairness)",
            runs: vec![one("", "incast32.toml", INCAST32, &[])],
        },
        Builtin {
            name: "clos3-rtt-fairness",
            about: "Fig. 25: three long flows to one receiver from its ToR, its pod and another pod",
            runs: vec![one("", "clos3-rtt-fairness.toml", CLOS3_RTT_FAIRNESS, &[])],
        },
        Builtin {
            name: "fig11",
            about: "Fig. 11: one MoE training step's collectives on 16 ranks of the 320-host Clos (all-gather, 4 all-to-alls, reduce-scatter, all-reduce)",
            runs: vec![one("", "fig11-moe-step.toml", FIG11, &[])],
        },
        Builtin {
            name: "fig24",
            about: "Fig. 24: rc-sr WRITE and READ throughput against an imposed OOD of 0-800 packets (40 Gb/s, 10 us)",
            runs: fig24(),
        },
        Builtin {
            name: "clos320-permutation",
            about: "320-host Clos, every host sends 2 MB to a seeded permutation peer, MTU 1000",
            runs: vec![one("", "clos320-permutation.toml", CLOS320, &[])],
        },
        Builtin {
            name: "clos320-alltoall",
            about: "320-host Clos, every host sends 16 KB to every other host (102,080 flows), MTU 1000",
            runs: vec![one("", "clos320-alltoall.toml", CLOS320_ALLTOALL, &[])],
        },
    ]
}

/// The built-in called `name`.
pub fn builtin(name: &str) -> Result<Builtin, ScenarioError> {
    let all = builtins();
    let known = all.iter().map(|b| b.name).collect::<Vec<_>>().join(", ");
    all.into_iter()
        .find(|b| b.name == name)
        .ok_or(ScenarioError::UnknownBuiltin {
            name: name.to_owned(),
            known,
        })
}

impl Builtin {
    /// The runs, each parsed and checked, with `overrides` (the user's `--set`)
    /// applied after the built-in's own.
    pub fn runs(&self, overrides: &[Override]) -> Result<Vec<BuiltinRun>, ScenarioError> {
        self.runs
            .iter()
            .map(|t| {
                let file = format!("builtin:{} ({})", self.name, t.file);
                let mut all = t
                    .overrides
                    .iter()
                    .map(|o| Override::parse(o))
                    .collect::<Result<Vec<_>, _>>()?;
                all.extend_from_slice(overrides);
                let mut scenario = parse(&file, t.text, &all)?;
                scenario.check(&file)?;
                let base = scenario
                    .name
                    .clone()
                    .unwrap_or_else(|| self.name.to_owned());
                scenario.name = Some(if t.label.is_empty() {
                    base
                } else {
                    format!("{base} {}", t.label)
                });
                Ok(BuiltinRun {
                    label: t.label.clone(),
                    scenario,
                    sweep: t.sweep.clone(),
                })
            })
            .collect()
    }

    /// Number of runs (1, or the points of a sweep).
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Always false: every built-in has at least one run.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}
