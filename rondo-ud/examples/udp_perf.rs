//! Loopback goodput of Rondo over the UDP datapath against the raw blaster on the
//! same sockets, one thread per side.
//!
//! `cargo run --release -p rondo-ud --example udp_perf -- [MBYTES] [PATHS] [MSG_KB]`
//!
//! Prints one line per transport with goodput (Gb/s), packets per second, and the
//! CPU time of each side's thread (packets per second per core = packets / CPU s).
//! The flow uses the UDP profile (`HostProfile::HOST_STACK`); environment variables override it for
//! experiments: `PACING`, `PROBING`, `SCHED` (0/1), `BURST`, `LINE_GBPS`,
//! `BASE_RTT_US`, `Q0`, and for the datapath `BATCH`, `SOCKBUF_MB`, the poll wait
//! `WAIT_US`, `TRACE` (per-path windows every 100 ms), and
//! `ONLY=rondo` (skip the raw run).

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the UDP datapath is Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use rondo_proto::{BufferConfig, Endpoint, Event, SharedBuffer};
    use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
    use std::time::{Duration, Instant};

    /// (on-CPU, waiting-for-a-CPU) of this thread, from /proc/thread-self/schedstat.
    fn sched() -> (Duration, Duration) {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let mut f = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
        let run = f.next().unwrap_or(0);
        let wait = f.next().unwrap_or(0);
        (Duration::from_nanos(run), Duration::from_nanos(wait))
    }

    fn udp(paths: u16) -> UdpConfig {
        UdpConfig {
            local_ip: "127.0.0.1".parse().unwrap(),
            base_port: 0,
            paths,
            batch: std::env::var("BATCH")
                .map(|v| v.parse().unwrap())
                .unwrap_or(64),
            socket_buffer: std::env::var("SOCKBUF_MB")
                .map(|v| v.parse::<usize>().unwrap() << 20)
                .unwrap_or(4 << 20),
            ..UdpConfig::default()
        }
    }

    pub fn main() {
        let args: Vec<u64> = std::env::args()
            .skip(1)
            .map(|a| a.parse().expect("numeric arguments"))
            .collect();
        let mbytes = args.first().copied().unwrap_or(200);
        let paths = args.get(1).copied().unwrap_or(4) as u16;
        let msg_kb = args.get(2).copied().unwrap_or(1024) as usize;
        let total = mbytes << 20;
        // The UDP profile, with environment overrides for experiments.
        let env = |k: &str| std::env::var(k).ok();
        let mut flow = rondo_ud::HostProfile::HOST_STACK.flow_config(paths);
        flow.token = Some(0xfeed);
        if let Some(v) = env("PACING") {
            flow.pacing = v == "1";
        }
        if let Some(v) = env("BURST") {
            flow.pacing_burst = v.parse().unwrap();
        }
        if let Some(v) = env("PROBING") {
            flow.probing = v == "1";
        }
        if let Some(v) = env("SCHED") {
            flow.scheduler = v == "1";
        }
        if let Some(v) = env("LINE_GBPS") {
            flow.line_rate_bps = v.parse::<u64>().unwrap() * 1_000_000_000;
        }
        if let Some(v) = env("BASE_RTT_US") {
            let t = rondo_proto::Duration::from_us(v.parse().unwrap());
            flow.base_rtt = Some(vec![t; usize::from(paths)]);
        }
        if let Some(v) = env("Q0") {
            flow.q0 = v.parse().unwrap();
            flow.initial_window = flow.initial_window.max(flow.q0 / 4.0);
        }
        let payload = flow.payload_per_packet();
        let wait = Duration::from_micros(
            std::env::var("WAIT_US")
                .map(|v| v.parse().unwrap())
                .unwrap_or(1000),
        );
        let mtu = flow.mtu;

        // ---------------------------------------------------------------- raw
        let raw_only = std::env::var("ONLY").ok();
        let mut tx = UdpDatapath::bind(udp(paths)).unwrap();
        let mut rx = UdpDatapath::bind(udp(paths)).unwrap();
        let peer = rx.local_addrs().to_vec();
        let packets = if raw_only.as_deref() == Some("rondo") {
            1
        } else {
            total / payload as u64
        };
        let start = Instant::now();
        let receiver = std::thread::spawn(move || {
            let mut c = rondo_ud::udp::RawCount::default();
            let mut last = Instant::now();
            while last.elapsed() < Duration::from_millis(300) {
                let more = rx.raw_receive(Duration::from_millis(5)).unwrap();
                if more.datagrams > 0 {
                    c.datagrams += more.datagrams;
                    c.bytes += more.bytes;
                    last = Instant::now();
                }
            }
            (c, last, sched().0, rx.stats())
        });
        let sent = tx.raw_blast(&peer, mtu, packets).unwrap();
        let tx_cpu = sched().0;
        let (count, last, rx_cpu, rx_stats) = receiver.join().unwrap();
        let secs = (last - start).as_secs_f64();
        let raw_gbps = count.datagrams as f64 * payload as f64 * 8.0 / secs / 1e9;
        println!(
            "raw-udp: sent {sent} received {} ({:.1}%) in {secs:.3}s goodput {raw_gbps:.2} Gb/s ({:.0} pps) tx cpu {:.2}s rx cpu {:.2}s gso {} gro {} (gro bufs {})",
            count.datagrams,
            100.0 * count.datagrams as f64 / sent.max(1) as f64,
            count.datagrams as f64 / secs,
            tx_cpu.as_secs_f64(),
            rx_cpu.as_secs_f64(),
            tx.gso(),
            tx.gro(),
            rx_stats.gro_receives,
        );

        // ---------------------------------------------------------------- rondo
        let clock = Clock::new();
        let mut da = UdpDatapath::bind(udp(paths)).unwrap();
        let mut db = UdpDatapath::bind(udp(paths)).unwrap();
        da.add_peer(1, db.local_addrs().to_vec()).unwrap();
        db.add_peer(2, da.local_addrs().to_vec()).unwrap();
        let mut ea = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
        let mut eb = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
        let ha = ea.connect(clock.now(), 1, 2, &flow).unwrap();
        let hb = eb.connect(clock.now(), 2, 1, &flow).unwrap();
        let msg = vec![0x5a; msg_kb << 10];
        let n_msgs = (total as usize).div_ceil(msg.len());
        // The messages are ready before the clock starts, as perftest posts from a
        // registered buffer: the sender thread's time is the transport's.
        let mut ready: std::collections::VecDeque<Vec<u8>> =
            (0..n_msgs).map(|_| msg.clone()).collect();
        let cpu0 = sched().0;
        let start = Instant::now();
        let receiver = std::thread::Builder::new()
            .name("rondo-rx".into())
            .spawn(move || {
                let mut got = 0u64;
                let mut msgs = 0;
                while msgs < n_msgs {
                    db.poll(&mut eb, &clock, wait).unwrap();
                    while let Some(e) = eb.poll_event(hb) {
                        if let Event::Received { data, .. } = e {
                            got += data.len() as u64;
                            msgs += 1;
                        }
                    }
                }
                let done = Instant::now();
                let cpu = sched().0;
                // Keep acknowledging until the sender is done.
                let until = Instant::now() + Duration::from_millis(200);
                while Instant::now() < until {
                    db.poll(&mut eb, &clock, wait).unwrap();
                }
                (
                    got,
                    done,
                    cpu,
                    db.stats(),
                    eb.connection(hb).receiver_stats().clone(),
                )
            })
            .unwrap();
        let mut posted = 0;
        let mut next_report = Instant::now();
        let mut completed = 0;
        let window = 8;
        while completed < n_msgs {
            while posted < n_msgs && posted - completed < window {
                ea.post(ha, clock.now(), posted as u64, ready.pop_front().unwrap())
                    .unwrap();
                posted += 1;
            }
            da.poll(&mut ea, &clock, wait).unwrap();
            if env("TRACE").is_some() && Instant::now() >= next_report {
                next_report = Instant::now() + Duration::from_millis(100);
                let conn = ea.connection(ha);
                let cc = conn.congestion_control();
                for (i, p) in conn.paths().iter().enumerate() {
                    eprint!(
                        "[w {:.0} if {} srtt {:?} r {:?}] ",
                        cc.window(i),
                        conn.paths().inflight(i),
                        p.srtt().map(|d| d.as_ns() / 1000),
                        cc.arcc().map(|a| a.ack_rate(i))
                    );
                }
                eprintln!();
            }
            while let Some(e) = ea.poll_event(ha) {
                match e {
                    Event::SendComplete { .. } => completed += 1,
                    Event::Error(e) => panic!("connection failed: {e}"),
                    _ => {}
                }
            }
        }
        let tx_cpu = sched().0 - cpu0;
        let (got, done, rx_cpu, rx_stats, rs) = receiver.join().unwrap();
        let secs = (done - start).as_secs_f64();
        let gbps = got as f64 * 8.0 / secs / 1e9;
        let pkts = rs.data_packets as f64;
        let ss = ea.connection(ha).sender_stats();
        println!(
            "rondo:   {got} bytes in {secs:.3}s goodput {gbps:.2} Gb/s ({:.0} pps) tx cpu {:.2}s rx cpu {:.2}s retx {} (spurious {}) probes {} ood p99 {} max {} repaired {}",
            pkts / secs,
            tx_cpu.as_secs_f64(),
            rx_cpu.as_secs_f64(),
            ss.retransmissions,
            ss.spurious_retransmissions,
            ss.probes_sent,
            rs.ood.quantile(0.99),
            rs.ood.max(),
            rs.placed_repaired,
        );
        println!("rondo tx datapath: {:?}", da.stats());
        println!("rondo rx datapath: {:?}", rx_stats);
        println!("ratio rondo / raw-udp goodput: {:.2}", gbps / raw_gbps);
    }
}
