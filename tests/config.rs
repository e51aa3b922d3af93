//! Configuration through the real binary: layering (file < env < flags), refusal of bad values
//! with exit code 2 and the key named, and the README's table matching the declared options.

use std::process::Output;

use stoker::config::OPTIONS;

use crate::common::bin::{Served, stoker};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_values_exit_2_naming_key_and_form() {
    let dir = tempfile::tempdir().unwrap();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (
            &["serve", "--http-listen", "localhost"],
            &[],
            "invalid value \"localhost\" for `http.listen` (from flag --http-listen): expected an IP address and port",
        ),
        (
            &["serve"],
            &[("STOKER_LOG_FORMAT", "xml")],
            "`log.format` (from environment variable STOKER_LOG_FORMAT): expected one of human, json",
        ),
        (
            &["serve"],
            &[("STOKER_HTTP_SHUTDOWN_TIMEOUT", "soon")],
            "`http.shutdown_timeout`",
        ),
        (
            &["serve", "--config", "missing.toml"],
            &[],
            "cannot read config file missing.toml",
        ),
    ];
    for (args, env, expected) in cases {
        let out = stoker(dir.path())
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        !dir.path().join("stoker-data").exists(),
        "nothing created on a bad config"
    );
}

#[test]
fn config_file_errors_name_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("typo.toml"),
        "[http]\nlisen = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("broken.toml"), "[http\n").unwrap();
    std::fs::write(dir.path().join("value.toml"), "[log]\nformat = 3\n").unwrap();
    for (file, expected) in [
        (
            "typo.toml",
            "config file typo.toml: unknown key `http.lisen`",
        ),
        ("broken.toml", "config file broken.toml is not valid TOML"),
        (
            "value.toml",
            "invalid value \"3\" for `log.format` (from config file value.toml)",
        ),
    ] {
        let out = stoker(dir.path())
            .args(["serve", "--config", file])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{file}");
        assert!(stderr(&out).contains(expected), "{file}: {}", stderr(&out));
    }
}

#[test]
fn file_then_env_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stoker.toml"),
        "data_dir = \"from-file\"\n[http]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n",
    )
    .unwrap();
    // File alone: data dir and JSON logs from the file.
    let mut cmd = stoker(dir.path());
    cmd.args(["serve", "--config", "stoker.toml"]);
    let served = Served::spawn(cmd);
    assert!(
        served.log[0].starts_with('{'),
        "JSON logs: {}",
        served.log[0]
    );
    served.signal("TERM");
    assert_eq!(served.wait().0, Some(0));
    assert!(dir.path().join("from-file/stoker.db").exists());

    // Env beats the file; the flag beats env.
    let mut cmd = stoker(dir.path());
    cmd.args(["serve", "--config", "stoker.toml", "--log-format", "human"])
        .env("STOKER_DATA_DIR", "from-env")
        .env("STOKER_LOG_FORMAT", "json");
    let served = Served::spawn(cmd);
    assert!(
        !served.log[0].starts_with('{'),
        "flag wins: {}",
        served.log[0]
    );
    served.signal("TERM");
    assert_eq!(served.wait().0, Some(0));
    assert!(dir.path().join("from-env/stoker.db").exists());
}

/// README's config table lists exactly the declared options, in order.
#[test]
fn readme_config_table_matches_options() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = readme
        .split("<!-- config-table:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- config-table:end -->").next())
        .expect("README has a config table between markers");
    let rows: Vec<Vec<String>> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect();
    let expected: Vec<Vec<String>> = OPTIONS
        .iter()
        .map(|o| {
            vec![
                o.key.to_string(),
                o.env.to_string(),
                format!("--{}", o.flag),
                if o.default.is_empty() {
                    "(empty)".to_string()
                } else {
                    o.default.to_string()
                },
                o.help.to_string(),
            ]
        })
        .collect();
    assert_eq!(
        rows, expected,
        "README's config table must list OPTIONS as `| `key` | `ENV` | `--flag` | `default` | help |`"
    );
}

/// `deploy.image_url` names a file (the image the nodes download), unlike `http.public_url`,
/// a base URL: a path is required, and https (the bootstrap has no TLS) or a directory refused.
#[test]
fn deploy_image_url_is_a_file_url() {
    use stoker::config::Layers;
    let resolve = |url: &str| {
        Layers::default()
            .with_flag("deploy.image_url", url.to_string())
            .resolve()
    };
    let config = resolve("http://10.77.0.1:8080/boot/images/os.img").unwrap();
    assert_eq!(
        config.deploy.image_url.as_deref(),
        Some("http://10.77.0.1:8080/boot/images/os.img")
    );
    assert_eq!(resolve("").unwrap().deploy.image_url, None);
    for bad in [
        "http://10.77.0.1:8080",
        "http://10.77.0.1:8080/",
        "http://10.77.0.1/images/",
        "https://mirror/os.img",
        "ftp://mirror/os.img",
        "http:///os.img",
        "http://host/a b.img",
    ] {
        let err = resolve(bad).unwrap_err().to_string();
        assert!(
            err.contains("`deploy.image_url`") && err.contains("an http:// URL of a file"),
            "{bad}: {err}"
        );
    }
}

/// `deploy.image_checksum` is checked when the configuration loads, not at each node's
/// write_image: a typo would otherwise fail every node of a deployment.
#[test]
fn deploy_image_checksum_is_checked_at_load() {
    use stoker::config::Layers;
    let resolve = |sum: &str| {
        Layers::default()
            .with_flag("deploy.image_checksum", sum.to_string())
            .resolve()
    };
    let sha = "ab".repeat(32);
    for good in [
        format!("sha256:{sha}"),
        format!("SHA256:{}", sha.to_uppercase()),
        sha.clone(),
        format!("md5:{}", "0f".repeat(16)),
    ] {
        let config = resolve(&good).unwrap();
        assert_eq!(config.deploy.image_checksum.as_deref(), Some(good.as_str()));
    }
    assert_eq!(resolve("").unwrap().deploy.image_checksum, None);
    for bad in [
        "sha256:abc",
        &format!("sha1:{}", "ab".repeat(20)),
        &format!("sha256:{}zz", "ab".repeat(31)),
        "d41d8cd98f00b204e9800998ecf8427",
    ] {
        let err = resolve(bad).unwrap_err().to_string();
        assert!(
            err.contains("`deploy.image_checksum`") && err.contains("sha256:HEX"),
            "{bad}: {err}"
        );
    }
}
