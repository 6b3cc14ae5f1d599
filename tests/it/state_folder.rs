//! The state folder (`MAILGATE_HOME`) and everything mailgate keeps in it (journal, outbox,
//! downloads, handoffs, demo) are trusted only after the private-folder check: a real
//! directory owned by this user with no group/other bits, entries never reached through a
//! symlink. Anything else is refused at startup, naming the rule, and nothing planted is
//! followed, written to or deleted (issue 8, findings 7 and 9).

use std::path::{Path, PathBuf};

use crate::util::{
    ONE_MAILBOX, World, demo_config, give_away, mkdir_mode, running_as_root, sorted_names,
    write_mode,
};

/// The environments under which a process keeps something in the state folder, with the entry
/// it keeps there.
const STATE_USERS: [(&str, &[(&str, &str)]); 4] = [
    ("journal.jsonl", &[("MAILGATE_JOURNAL", "true")]),
    ("downloads", &[("PLUGIN_ALLOW_WRITES", "true")]),
    ("handoffs", &[("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")]),
    (
        "outbox",
        &[
            ("PLUGIN_ALLOW_SEND", "true"),
            ("OUTLOOK_SEND_FROM", "finance@example.com"),
            ("OUTLOOK_ALLOWED_SENDERS", "finance@example.com"),
        ],
    ),
];

/// A world whose demo config (Maildir mailboxes, so the send gate uses the outbox) lives in the
/// default state folder, with `MAILGATE_HOME` then pointed at `home`.
async fn world_with_home(home: &Path) -> (World, String) {
    let world = World::new();
    let config = demo_config(&world).await;
    let world = world.with("MAILGATE_HOME", &home.display().to_string());
    (world, config)
}

/// Starts the app as `serve` would (`policy check` builds it through the same
/// `startup::build_app` and exits 0 when it starts) with `env` added; returns (success, stderr).
async fn serve(world: &World, config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let out = world
        .run_with(env, &["--config", config, "policy", "check"])
        .await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_refused(ok: bool, stderr: &str, needles: &[&str], case: &str) {
    assert!(!ok, "{case}: startup must be refused; stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{case}: one line: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{case}: {stderr:?} should name {needle:?}"
        );
    }
}

#[tokio::test]
async fn an_open_state_folder_is_refused_before_anything_is_kept_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    mkdir_mode(&shared, 0o777);
    let (world, config) = world_with_home(&shared).await;
    for (entry, env) in STATE_USERS {
        let (ok, stderr) = serve(&world, &config, env).await;
        assert_refused(
            ok,
            &stderr,
            &["state folder", "permissions are too open", "chmod 700"],
            entry,
        );
    }
    let out = world.run(&["demo", "--serve"]).await;
    assert_refused(
        out.status.success(),
        &String::from_utf8_lossy(&out.stderr),
        &["state folder", "too open"],
        "demo",
    );
    assert!(
        sorted_names(&shared).is_empty(),
        "nothing was created in it"
    );
    // Without anything to keep there (gates closed, no journal) the folder is not used at all.
    let (ok, stderr) = serve(&world, &config, &[]).await;
    assert!(ok, "{stderr}");
}

#[tokio::test]
async fn a_state_folder_owned_by_another_user_is_refused_even_for_root() {
    if !running_as_root("a_state_folder_owned_by_another_user_is_refused_even_for_root") {
        return;
    }
    // The finding's setup: a 0777 folder of another user, with an outbox symlink and a 0666
    // journal planted in it.
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    mkdir_mode(&shared, 0o777);
    let elsewhere = tmp.path().join("elsewhere");
    mkdir_mode(&elsewhere, 0o700);
    std::os::unix::fs::symlink(&elsewhere, shared.join("outbox")).unwrap();
    write_mode(&shared.join("journal.jsonl"), b"", 0o666);
    give_away(&shared.join("journal.jsonl"));
    give_away(&shared.join("outbox"));
    give_away(&shared);
    let (world, config) = world_with_home(&shared).await;
    for (entry, env) in STATE_USERS {
        let (ok, stderr) = serve(&world, &config, env).await;
        assert_refused(
            ok,
            &stderr,
            &["state folder", "must be owned by the user mailgate runs as"],
            entry,
        );
    }
    assert!(sorted_names(&elsewhere).is_empty());
    assert_eq!(std::fs::read(shared.join("journal.jsonl")).unwrap(), b"");
}

/// A private state folder of ours, with `name` planted in it as a symlink to a folder outside.
fn state_with_symlink(tmp: &Path, name: &str) -> (PathBuf, PathBuf) {
    let state = tmp.join(format!("state-{name}"));
    mkdir_mode(&state, 0o700);
    let elsewhere = tmp.join(format!("elsewhere-{name}"));
    mkdir_mode(&elsewhere, 0o700);
    std::os::unix::fs::symlink(&elsewhere, state.join(name)).unwrap();
    (state, elsewhere)
}

#[tokio::test]
async fn a_planted_symlink_in_the_state_folder_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    for (entry, env) in STATE_USERS {
        if entry == "journal.jsonl" {
            continue;
        }
        let (state, elsewhere) = state_with_symlink(tmp.path(), entry);
        let (world, config) = world_with_home(&state).await;
        let (ok, stderr) = serve(&world, &config, env).await;
        assert_refused(ok, &stderr, &["must be a real directory"], entry);
        assert!(
            stderr.contains(entry) || stderr.contains("download folder"),
            "{entry}: the refusal names the folder: {stderr}"
        );
        assert!(
            sorted_names(&elsewhere).is_empty(),
            "{entry}: nothing written through it"
        );
    }
}

#[tokio::test]
async fn a_planted_journal_is_never_appended_to() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    mkdir_mode(&state, 0o700);
    let (world, config) = world_with_home(&state).await;
    let world = world.with("MAILGATE_JOURNAL", "true");
    let journal = state.join("journal.jsonl");
    // Open to everyone (the finding's 0666), then hard-linked to a name elsewhere.
    write_mode(&journal, b"", 0o666);
    let (ok, stderr) = serve(&world, &config, &[]).await;
    assert_refused(ok, &stderr, &["run journal", "too open"], "0666 journal");
    std::fs::set_permissions(
        &journal,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::hard_link(&journal, tmp.path().join("alias.jsonl")).unwrap();
    let (ok, stderr) = serve(&world, &config, &[]).await;
    assert_refused(
        ok,
        &stderr,
        &["run journal", "hard link"],
        "hard-linked journal",
    );
    std::fs::remove_file(tmp.path().join("alias.jsonl")).unwrap();
    assert_eq!(std::fs::read(&journal).unwrap(), b"", "nothing appended");
    // Our own private journal is used as before.
    let (ok, stderr) = serve(&world, &config, &[]).await;
    assert!(ok, "{stderr}");

    if !running_as_root("a_planted_journal_is_never_appended_to (owner part)") {
        return;
    }
    std::fs::remove_file(&journal).unwrap();
    write_mode(&journal, b"", 0o600);
    give_away(&journal);
    let (ok, stderr) = serve(&world, &config, &[]).await;
    assert_refused(
        ok,
        &stderr,
        &["run journal", "must be owned by the user mailgate runs as"],
        "another user's journal",
    );
    assert_eq!(std::fs::read(&journal).unwrap(), b"", "nothing appended");
}

// Finding 9: the demo deletes only its own marked tree, never through a symlink.

fn victim(tmp: &Path) -> PathBuf {
    let victim = tmp.join("victim");
    mkdir_mode(&victim, 0o700);
    mkdir_mode(&victim.join("mail"), 0o700);
    std::fs::write(victim.join("mail/keep.eml"), b"Subject: keep\r\n\r\nme\r\n").unwrap();
    victim
}

#[tokio::test]
async fn the_demo_never_deletes_through_a_symlinked_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = victim(tmp.path());
    let state = tmp.path().join("state");
    mkdir_mode(&state, 0o700);
    std::os::unix::fs::symlink(&victim, state.join("demo")).unwrap();
    let world = World::new().with("MAILGATE_HOME", &state.display().to_string());
    for args in [
        &["demo", "--serve"][..],
        &["demo", "--reset", "--serve"][..],
    ] {
        let out = world.run(args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_refused(
            out.status.success(),
            &stderr,
            &["demo folder", "must be a real directory"],
            &format!("{args:?}"),
        );
        assert!(
            victim.join("mail/keep.eml").exists(),
            "{args:?} deleted the target"
        );
    }
}

#[tokio::test]
async fn the_demo_never_deletes_a_tree_it_did_not_mark() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    mkdir_mode(&state, 0o700);
    let demo = state.join("demo");
    mkdir_mode(&demo, 0o700);
    mkdir_mode(&demo.join("mail"), 0o700);
    std::fs::write(demo.join("mail/keep.eml"), b"Subject: keep\r\n\r\nme\r\n").unwrap();
    let world = World::new().with("MAILGATE_HOME", &state.display().to_string());
    for args in [
        &["demo", "--serve"][..],
        &["demo", "--reset", "--serve"][..],
    ] {
        let out = world.run(args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_refused(
            out.status.success(),
            &stderr,
            &["demo folder", ".demo-version", "nothing was deleted"],
            &format!("{args:?}"),
        );
        assert!(demo.join("mail/keep.eml").exists(), "{args:?} deleted it");
    }
    // A marker mailgate did not write is not enough either.
    std::fs::write(demo.join(".demo-version"), b"something-else").unwrap();
    let out = world.run(&["demo", "--reset", "--serve"]).await;
    assert!(!out.status.success());
    assert!(demo.join("mail/keep.eml").exists());
}

#[tokio::test]
async fn the_demo_rebuilds_its_own_marked_tree() {
    let world = World::new();
    demo_config(&world).await;
    let mail = world.state().join("demo/mail");
    std::fs::write(mail.join("finance/stray.txt"), b"x").unwrap();
    // `--serve` on a closed stdin ends with a one-line hint once the demo is set up.
    let out = world.run(&["demo", "--reset", "--serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("could not be set up"), "{stderr}");
    assert!(
        !mail.join("finance/stray.txt").exists(),
        "the marked tree was rebuilt"
    );
    assert!(mail.join("finance").is_dir());
    // Even a marked tree is not removed through a `mail` symlink.
    let tmp = tempfile::tempdir().unwrap();
    let victim = victim(tmp.path());
    std::fs::remove_dir_all(&mail).unwrap();
    std::os::unix::fs::symlink(victim.join("mail"), &mail).unwrap();
    let out = world.run(&["demo", "--reset", "--serve"]).await;
    assert!(!out.status.success());
    assert!(victim.join("mail/keep.eml").exists());
}

#[tokio::test]
async fn a_config_in_a_private_state_folder_still_works() {
    // The default layout: everything created by mailgate passes its own checks.
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        .with("MAILGATE_JOURNAL", "true")
        .with("PLUGIN_ALLOW_WRITES", "true")
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true");
    for _ in 0..2 {
        let out = world.run(&["policy", "check"]).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        sorted_names(&world.state()),
        ["downloads", "handoffs", "journal.jsonl"]
    );
}
