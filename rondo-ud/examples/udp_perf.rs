//! Loopback goodput of Rondo over the UDP datapath against the raw blaster on the
//! same sockets, one thread per side.
//!
//! `cargo run --release -p rondo-ud --example udp_perf -- [MBYTES] [PATHS] [MSG_KB]`
//!
//! Prints one line per transport with goodput (Gb/s), packets per second, and the
//! CPU time of each side's thread (packets per second per core = packets / CPU s).

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
    use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
    use rondo_ud::{Endpoint, EndpointConfig, Event, FlowConfig};
    use std::time::{Duration, Instant};

    fn thread_cpu() -> Duration {
        // /proc/thread-self/stat fields 14 and 15: utime and stime in clock ticks.
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        Duration::from_millis(ticks * 10)
    }

    fn udp(paths: u16) -> UdpConfig {
        UdpConfig {
            local_ip: "127.0.0.1".parse().unwrap(),
            base_port: 0,
            paths,
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
        let flow = FlowConfig {
            paths,
            rto_min: rondo_ud::Duration::from_ms(2),
            retry_limit: 50,
            token: Some(0xfeed),
            pacing_burst: std::env::var("BURST")
                .map(|v| v.parse().unwrap())
                .unwrap_or(16),
            probing: std::env::var("PROBING").map(|v| v == "1").unwrap_or(true),
            line_rate_bps: std::env::var("LINE_GBPS")
                .map(|v| v.parse::<u64>().unwrap() * 1_000_000_000)
                .unwrap_or(100_000_000_000),
            pacing: std::env::var("PACING").map(|v| v == "1").unwrap_or(true),
            base_rtt: std::env::var("BASE_RTT_US")
                .ok()
                .map(|v| vec![rondo_ud::Duration::from_us(v.parse().unwrap()); usize::from(paths)]),
            ..FlowConfig::default()
        };
        let payload = flow.payload_per_packet();
        let mtu = flow.mtu;

        // ---------------------------------------------------------------- raw
        let mut tx = UdpDatapath::bind(udp(paths)).unwrap();
        let mut rx = UdpDatapath::bind(udp(paths)).unwrap();
        let peer = rx.local_addrs().to_vec();
        let packets = total / payload as u64;
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
            (c, last, thread_cpu(), rx.stats())
        });
        let sent = tx.raw_blast(&peer, mtu, packets).unwrap();
        let tx_cpu = thread_cpu();
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
        let mut ea = Endpoint::new(EndpointConfig::default()).unwrap();
        let mut eb = Endpoint::new(EndpointConfig::default()).unwrap();
        let ha = ea.connect(clock.now(), 1, 2, &flow).unwrap();
        let hb = eb.connect(clock.now(), 2, 1, &flow).unwrap();
        let msg = vec![0x5a; msg_kb << 10];
        let n_msgs = (total as usize).div_ceil(msg.len());
        let start = Instant::now();
        let receiver = std::thread::spawn(move || {
            let mut got = 0u64;
            let mut msgs = 0;
            while msgs < n_msgs {
                db.poll(&mut eb, &clock, Duration::from_millis(1)).unwrap();
                while let Some(e) = eb.poll_event(hb) {
                    if let Event::Received { data, .. } = e {
                        got += data.len() as u64;
                        msgs += 1;
                    }
                }
            }
            let done = Instant::now();
            // Keep acknowledging until the sender is done.
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until {
                db.poll(&mut eb, &clock, Duration::from_millis(1)).unwrap();
            }
            (
                got,
                done,
                thread_cpu(),
                db.stats(),
                eb.connection(hb).receiver_stats().clone(),
            )
        });
        let mut posted = 0;
        let mut completed = 0;
        let window = 8;
        while completed < n_msgs {
            while posted < n_msgs && posted - completed < window {
                ea.post(ha, clock.now(), posted as u64, msg.clone())
                    .unwrap();
                posted += 1;
            }
            da.poll(&mut ea, &clock, Duration::from_millis(1)).unwrap();
            while let Some(e) = ea.poll_event(ha) {
                match e {
                    Event::SendComplete { .. } => completed += 1,
                    Event::Error(e) => panic!("connection failed: {e}"),
                    _ => {}
                }
            }
        }
        let tx_cpu = thread_cpu();
        let (got, done, rx_cpu, rx_stats, rs) = receiver.join().unwrap();
        let secs = (done - start).as_secs_f64();
        let gbps = got as f64 * 8.0 / secs / 1e9;
        let pkts = rs.data_packets as f64;
        let ss = ea.connection(ha).sender_stats();
        println!(
            "rondo:   {got} bytes in {secs:.3}s goodput {gbps:.2} Gb/s ({:.0} pps) tx cpu {:.2}s rx cpu {:.2}s retx {} probes {} ood p99 {} max {}",
            pkts / secs,
            tx_cpu.as_secs_f64(),
            rx_cpu.as_secs_f64(),
            ss.retransmissions,
            ss.probes_sent,
            rs.ood.quantile(0.99),
            rs.ood.max(),
        );
        println!("rondo tx datapath: {:?}", da.stats());
        println!("rondo rx datapath: {:?}", rx_stats);
        println!("ratio rondo / raw-udp goodput: {:.2}", gbps / raw_gbps);
    }
}
