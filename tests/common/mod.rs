//! Test support: [`TestDaemon`] runs the real daemon in-process on 127.0.0.1:0 with a temporary
//! data directory, and [`Http`] is a small blocking client that never treats a status as an error.

pub mod bin;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::thread::JoinHandle;

use stoker::config::{Config, Layers};
use stoker::daemon::Daemon;

/// A daemon running in this process, stopped (gracefully) when dropped.
pub struct TestDaemon {
    pub addr: SocketAddr,
    /// The DHCP server's address, when the config enables it.
    pub dhcp: Option<SocketAddr>,
    /// The TFTP server's address, when the config enables it.
    pub tftp: Option<SocketAddr>,
    dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        Self::start_bundled("skip")
    }

    /// Start with `plugins.bundled` = `install` (the shipped release is installed) or `skip`.
    pub fn start_bundled(bundled: &str) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let config = Layers::default()
            .with_flag("data_dir", dir.path().join("data").display().to_string())
            .with_flag("http.listen", "127.0.0.1:0".to_string())
            .with_flag("http.shutdown_timeout", "5".to_string())
            .with_flag("plugins.bundled", bundled.to_string())
            .resolve()
            .unwrap();
        Self::start_with(config, dir)
    }

    pub fn start_with(config: Config, dir: tempfile::TempDir) -> TestDaemon {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let daemon = match Daemon::start(&config) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = addr_tx.send(Err(format!("{e:#}")));
                        return Err(e);
                    }
                };
                let _ = addr_tx.send(Ok((
                    daemon.http_addr(),
                    daemon.dhcp_addr(),
                    daemon.tftp_addr(),
                )));
                daemon
                    .run_until(async {
                        let _ = stop_rx.await;
                    })
                    .await
            })
        });
        let (addr, dhcp, tftp) = addr_rx.recv().unwrap().expect("daemon failed to start");
        TestDaemon {
            addr,
            dhcp,
            tftp,
            dir: Some(dir),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir
            .as_ref()
            .expect("data dir lives as long as the daemon")
            .path()
            .join("data")
            .join("stoker.db")
    }

    pub fn http(&self) -> Http {
        Http { base: self.url("") }
    }

    /// Stop gracefully; hand back the data directory so the test can inspect what is left.
    pub fn stop(mut self) -> anyhow::Result<tempfile::TempDir> {
        self.stop_inner()?;
        Ok(self.dir.take().expect("stopped once"))
    }

    fn stop_inner(&mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().expect("daemon thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// A response: status, content type and body.
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub struct Http {
    base: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into()
}

fn read(mut resp: ureq::http::Response<ureq::Body>) -> Resp {
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Resp {
        status: resp.status().as_u16(),
        content_type,
        body: resp.body_mut().read_to_string().unwrap(),
    }
}

impl Http {
    /// GET a URL and parse its JSON body.
    pub fn raw_get_json(url: &str) -> serde_json::Value {
        read(agent().get(url).call().unwrap()).json()
    }

    /// PUT a JSON body to a URL.
    pub fn raw_put(url: &str, body: &str) -> Resp {
        read(
            agent()
                .put(url)
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    /// POST with extra headers.
    pub fn raw_post(url: &str, body: &str, headers: &[(&str, &str)]) -> Resp {
        let mut req = agent().post(url);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send(body).unwrap())
    }

    /// GET a binary body with extra headers; returns status, bytes and lower-case headers.
    pub fn get_bytes(
        url: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Vec<u8>, std::collections::HashMap<String, String>) {
        let mut req = agent().get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut resp = req.call().unwrap();
        let hs = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_vec()
            .unwrap();
        (resp.status().as_u16(), bytes, hs)
    }

    pub fn get(&self, path: &str) -> Resp {
        read(agent().get(format!("{}{path}", self.base)).call().unwrap())
    }

    pub fn put(&self, path: &str, body: &str) -> Resp {
        read(
            agent()
                .put(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    pub fn delete(&self, path: &str) -> Resp {
        read(
            agent()
                .delete(format!("{}{path}", self.base))
                .call()
                .unwrap(),
        )
    }

    pub fn post(&self, path: &str, body: &str) -> Resp {
        read(
            agent()
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }
}

/// A realistic inventory document for a node with the given MAC.
pub fn inventory(mac: &str) -> serde_json::Value {
    serde_json::json!({
        "interfaces": [
            {"name": "eno1", "mac": mac, "speed_mbps": 10000, "link": true},
            {"name": "eno2", "mac": format!("02{}", &mac[2..]), "link": false}
        ],
        "cpu": {"count": 32, "model": "Intel(R) Xeon(R) Silver 4314"},
        "memory_bytes": 274877906944u64,
        "disks": [
            {"name": "sda", "size_bytes": 480103981056u64, "model": "SAMSUNG MZ7L3480", "serial": "S6KMNE0R123456"},
            {"name": "sdb", "size_bytes": 3840755982336u64, "model": "INTEL SSDSC2KG03", "serial": "PHYG0123"}
        ],
        "system": {"vendor": "Dell Inc.", "product": "PowerEdge R650", "serial": "7XK2QH3"},
        "boot_mode": "uefi"
    })
}
