//! A plain HTTP/1.1 client for JSON APIs, with timeouts: the lab asks a Ray head's job
//! API through it, and `hotlab sweep --lab` asks a lab. (One request per connection; no
//! TLS: both live on a trusted network, or behind a proxy the lab's own page goes through.)

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The longest one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `http://HOST[:PORT]` → (host, port), `default_port` when none is given.
pub fn host_port(url: &str, default_port: u16) -> Result<(String, u16), String> {
    let rest = url
        .trim_end_matches('/')
        .strip_prefix("http://")
        .ok_or_else(|| format!("'{url}': give an http:// address (http://HOST:PORT)"))?;
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("'{url}': '{p}' is not a port"))?),
        None => (rest, default_port),
    };
    if host.is_empty() || host.contains('/') {
        return Err(format!("'{url}': no host name"));
    }
    Ok((host.to_string(), port))
}

/// One request with a JSON body (or none): the status and the body's text.
pub fn request(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<(u16, String)> {
    let addr = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .ok_or_else(|| anyhow!("{host}: no address"))?;
    let mut s =
        TcpStream::connect_timeout(&addr, TIMEOUT).with_context(|| format!("http://{host}:{port} is unreachable"))?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).and_then(|()| s.write_all(body.as_bytes()))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).context("no answer")?;
    parse_response(&raw)
}

/// The status and body of a raw HTTP/1.1 answer (chunked or not).
fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("an answer without headers"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("an answer without a status"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    Ok((status, if chunked { dechunk(body) } else { body.to_string() }))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).unwrap(), (200, "{}".into()));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (404, "{\"a\":1}".into()));
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn addresses_are_http_host_and_port() {
        assert_eq!(host_port("http://10.0.0.5:8265/", 1), Ok(("10.0.0.5".into(), 8265)));
        assert_eq!(host_port("http://head", 8265), Ok(("head".into(), 8265)));
        for bad in ["10.0.0.5:8265", "https://h:1", "http://h:port", "http://:1"] {
            assert!(host_port(bad, 1).is_err(), "{bad}");
        }
    }
}
