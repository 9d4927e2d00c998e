//! The loopback-TCP floor of the `ftab` workload: what this machine can do when the broker does
//! nothing at all.
//!
//! It runs the `ftab` workload's traffic shape without a broker: `--alice` closed-loop clients
//! each send a request of about a 2000-byte message and read a short reply, `--bob` clients each
//! send a short request and read a reply carrying a message, every client on its own loopback
//! connection, as in `ferry-bench ftab`. The server is a child process that answers each request
//! at once, with one read and one write per operation, and stores nothing. The pairs per second
//! it reaches bound what any broker can do for that mix on the machine, since a real broker does
//! this much work and then some.
//!
//! ```text
//! cargo run --release -p ferry-bench --example tcp_floor -- --alice 50 --bob 50 --size 2000 --seconds 10
//! ```

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes a request or reply carries besides a message body (frame header, names, ids).
const OVERHEAD: usize = 40;

/// What one client of the floor run sends and expects back.
#[derive(Clone, Copy)]
struct Shape {
    request: usize,
    reply: usize,
}

struct Args {
    alice: usize,
    bob: usize,
    size: usize,
    seconds: u64,
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        alice: 50,
        bob: 50,
        size: 2000,
        seconds: 10,
        threads: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: usize = value
            .parse()
            .map_err(|_| format!("{flag}: '{value}' is not a number"))?;
        match flag.as_str() {
            "--alice" => args.alice = n,
            "--bob" => args.bob = n,
            "--size" => args.size = n,
            "--seconds" => args.seconds = n as u64,
            "--threads" => args.threads = n.max(1),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

/// The server: answers each request of `shape` as soon as it is read. The first 4 bytes of a
/// request say which shape the client uses (its reply size).
async fn serve(listener: TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let mut head = [0u8; 8];
            if stream.read_exact(&mut head).await.is_err() {
                return;
            }
            let request = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let reply =
                vec![7u8; u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize];
            let mut buf = vec![0u8; request];
            while stream.read_exact(&mut buf).await.is_ok() {
                if stream.write_all(&reply).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// One closed-loop client: request, wait for the whole reply, repeat until `until`.
async fn client(addr: std::net::SocketAddr, shape: Shape, until: Instant) -> std::io::Result<u64> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(shape.request as u32).to_le_bytes());
    head[4..].copy_from_slice(&(shape.reply as u32).to_le_bytes());
    stream.write_all(&head).await?;
    let request = vec![b'x'; shape.request];
    let mut reply = vec![0u8; shape.reply];
    let mut done = 0;
    while Instant::now() < until {
        stream.write_all(&request).await?;
        stream.read_exact(&mut reply).await?;
        done += 1;
    }
    Ok(done)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("--serve") {
        // The child: serve on an ephemeral loopback port and print it for the parent.
        let rt = tokio::runtime::Runtime::new()?;
        return rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            println!("{}", listener.local_addr()?);
            serve(listener).await;
            Ok(())
        });
    }
    let args = parse_args()?;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("--serve")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)?;
    }
    let addr: std::net::SocketAddr = line.trim().parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()?;
    let started = Instant::now();
    let until = started + Duration::from_secs(args.seconds);
    let alice = Shape {
        request: args.size + OVERHEAD,
        reply: OVERHEAD / 2,
    };
    let bob = Shape {
        request: OVERHEAD,
        reply: args.size + OVERHEAD,
    };
    let (sends, reads) = rt.block_on(async {
        let run = |shape: Shape, n: usize| {
            (0..n)
                .map(|_| tokio::spawn(client(addr, shape, until)))
                .collect::<Vec<_>>()
        };
        let (alices, bobs) = (run(alice, args.alice), run(bob, args.bob));
        let mut totals = [0u64; 2];
        for (total, handles) in totals.iter_mut().zip([alices, bobs]) {
            for h in handles {
                *total += h.await??;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>((totals[0], totals[1]))
    })?;
    let secs = started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "tcp floor: {} alice, {} bob, {} B bodies, {:.1} s: sends/s {:.0}  reads/s {:.0}",
        args.alice,
        args.bob,
        args.size,
        secs,
        sends as f64 / secs,
        reads as f64 / secs
    );
    Ok(())
}
