//! The golden files in policy/ are exactly what the code registers: regenerate and compare.

use crate::util::World;

#[tokio::test]
async fn policy_files_match_the_code() {
    let world = World::new();
    let out_dir = world.path().join("policy");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = world
        .run(&["policy", "export", "--out", out_dir.to_str().unwrap()])
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policy");
    let mut compared = 0;
    for entry in walk(&out_dir) {
        let rel = entry.strip_prefix(&out_dir).unwrap();
        let fresh = std::fs::read_to_string(&entry).unwrap();
        let golden = std::fs::read_to_string(repo.join(rel)).unwrap_or_else(|_| {
            panic!(
                "policy/{} is missing: run `mailgate policy export`",
                rel.display()
            )
        });
        assert!(
            fresh == golden,
            "policy/{} drifted from the code: run `cargo run -- policy export` and review the diff",
            rel.display()
        );
        compared += 1;
    }
    assert_eq!(
        compared, 12,
        "eight catalogs, catalog.toml, surface.json, remote.json and delegated.json"
    );
    for name in [
        "read",
        "read+handoffs",
        "read+writes",
        "read+handoffs+writes",
        "read+send",
        "read+handoffs+send",
        "read+writes+send",
        "read+handoffs+writes+send",
    ] {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(repo.join(format!("catalogs/{name}.json"))).unwrap(),
        )
        .unwrap();
        let count = v["tools"].as_array().unwrap().len();
        let expected = match name {
            "read" => 12,
            "read+handoffs" => 14,
            "read+writes" => 17,
            "read+handoffs+writes" => 19,
            "read+send" => 13,
            "read+handoffs+send" => 15,
            "read+writes+send" => 18,
            _ => 20,
        };
        assert_eq!(count, expected, "{name}");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}
