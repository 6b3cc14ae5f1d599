#!/usr/bin/env bash
# Loopback-only IMAP + SMTP test mail server for mailgate's IMAP/SMTP integration tests (issue
# 12): real Dovecot and Postfix from Debian's packages, installed when missing, configured in a
# private folder and started without systemd; nothing can leave the machine. The install step
# also brings nginx-light, the TLS-terminating proxy of the resource server's proxy test
# (tests/it/oauth.rs), which that test starts itself on loopback; it never runs as a daemon.
#
#   scripts/mailserver.sh up        install (when missing) + configure + start + selftest; when
#                                   this instance already runs with this script's config, only
#                                   a port check (idempotent, well under a second)
#   scripts/mailserver.sh down      stop both daemons (no process or listener is left)
#   scripts/mailserver.sh env       the MT_* variables the tests read (eval "$(… env)")
#   scripts/mailserver.sh running   exit 0 when this instance is up (no root needed)
#   scripts/mailserver.sh selftest  IMAP/SMTP checks with Python's imaplib/smtplib
#   also: install | configure | start | stop | status | purge
#
# State lives in $MT_DIR, by default target/mailserver in the repository (git-ignored).
#
#   Dovecot 2.3 (Debian 12): IMAP 127.0.0.1:10143 (plain + STARTTLS), IMAPS 127.0.0.1:10993,
#                            LMTP 127.0.0.1:10024, SASL auth service 127.0.0.1:10012
#   Postfix 3.7 (Debian 12): SMTP 127.0.0.1:10025 (no auth, accepts mail for $MT_DOMAIN only)
#                            submission 127.0.0.1:10587 (STARTTLS required + AUTH PLAIN/LOGIN)
#   OAuth:    IMAP and submission also offer XOAUTH2 and OAUTHBEARER (RFC 7628), checked by
#             Dovecot's oauth2 passdb against the token introspection endpoint of the loopback
#             authorization server tests/clients/oauth-delegated-provider.mjs on 127.0.0.1:
#             $MT_OAUTH_PORT (10090; the tests start it there, this script never does), as the
#             confidential client "dovecot" with $MT_OAUTH_SECRET. The token's `email` is the user.
#             Without that server running every OAuth login fails; password logins are unaffected
#             (each passdb serves only its own mechanisms).
#   Users:    ANY local part at $MT_DOMAIN (default example.org) logs in with $MT_PASSWORD
#             (default "secret"); its Maildir is created on first use, with the special-use
#             folders Drafts, Sent, Trash, Junk, Archive. So each test takes a fresh user of its
#             own (no cleanup, no interference between parallel tests).
#   Delivery: postfix -> LMTP -> dovecot -> $MT_DIR/vmail/<domain>/<user>/Maildir, for any
#             recipient at $MT_DOMAIN.
#   TLS:      a throwaway CA ($MT_DIR/tls/ca.pem) signs a leaf for localhost/127.0.0.1, so
#             rustls/webpki clients can trust ca.pem (a bare self-signed CA:TRUE leaf is rejected).
#   Outbound: impossible by config (default_transport = error, no relayhost): a recipient outside
#             $MT_DOMAIN (example.com included) is refused at RCPT ("outbound mail disabled").
#   Processes: dovecot's imap processes carry their user in the title (verbose_proctitle), so a
#             test can find and kill the one serving its user.
#
# Runs as root, without systemd: daemons are started directly with their own config files.
# Nothing is written outside $MT_DIR except: apt packages, the system user "mailtest".
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MT_DIR=${MT_DIR:-$repo/target/mailserver}
MT_DOMAIN=${MT_DOMAIN:-example.org}
MT_PASSWORD=${MT_PASSWORD:-secret}
MT_IMAP_PORT=${MT_IMAP_PORT:-10143}
MT_IMAPS_PORT=${MT_IMAPS_PORT:-10993}
MT_LMTP_PORT=${MT_LMTP_PORT:-10024}
MT_AUTH_PORT=${MT_AUTH_PORT:-10012}
MT_SMTP_PORT=${MT_SMTP_PORT:-10025}
MT_SUBMISSION_PORT=${MT_SUBMISSION_PORT:-10587}
MT_OSUSER=${MT_OSUSER:-mailtest}
# The delegated-OAuth provider of the tests: Dovecot's config names its port, so it is fixed.
MT_OAUTH_PORT=${MT_OAUTH_PORT:-10090}
# Test-only secret of the introspection client (tests/clients/oauth-delegated-provider.mjs has the
# same default); it guards nothing but loopback test tokens, so the files holding it stay 0644.
MT_OAUTH_SECRET=${MT_OAUTH_SECRET:-dovecot-introspection-test-only}

log() { printf '[mailserver] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

cmd_install() {
  need_root
  if command -v dovecot >/dev/null && [ -x /usr/lib/postfix/sbin/master ] \
     && [ -e /usr/lib/dovecot/lmtp ] && [ -e /usr/lib/dovecot/imap ] && [ -x /usr/sbin/nginx ]; then
    log "packages already installed"; return 0
  fi
  # Never let package scripts start daemons on their default (0.0.0.0) ports.
  local created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; created_policy=1
  fi
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  echo "postfix postfix/mailname string localhost" | debconf-set-selections
  [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock || true)" ] || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    dovecot-imapd dovecot-lmtpd postfix openssl nginx-light >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         --no-install-recommends dovecot-imapd dovecot-lmtpd postfix openssl nginx-light >/dev/null; }
  [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  log "installed: dovecot $(dovecot --version | cut -d' ' -f1), postfix $(postconf -d -h mail_version 2>/dev/null)"
}

gen_tls() {
  local d=$MT_DIR/tls
  mkdir -p "$d"
  [ -s "$d/cert.pem" ] && return 0
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=mailtest CA" -keyout "$d/ca.key" -out "$d/ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$d/key.pem" -out "$d/leaf.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" > "$d/leaf.ext"
  openssl x509 -req -in "$d/leaf.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 3650 -extfile "$d/leaf.ext" -out "$d/cert.pem" 2>/dev/null
  chmod 600 "$d"/*.key "$d/key.pem"
}

cmd_configure() {
  # Postfix and Dovecot drop privileges: every folder above MT_DIR must be traversable by others, or the
  # daemons fail to start with little said (a `mktemp -d` parent is 0700).
  local d; d=$(dirname "$(realpath -m "$MT_DIR")")
  while [ "$d" != / ]; do
    [ -e "$d" ] && { [ $(( 8#$(stat -c %a "$d") & 1 )) = 1 ] || die "$d is not traversable by others (chmod o+x it, or put MT_DIR elsewhere)"; }
    d=$(dirname "$d")
  done
  need_root
  id "$MT_OSUSER" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$MT_OSUSER"
  local uid gid; uid=$(id -u "$MT_OSUSER"); gid=$(id -g "$MT_OSUSER")
  mkdir -p "$MT_DIR"/{etc,log,run,lib/dovecot,lib/postfix,vmail,postfix,spool/postfix}
  chmod 755 "$MT_DIR" "$MT_DIR/run"
  chown postfix: "$MT_DIR/lib/postfix"
  gen_tls

  chown "$uid:$gid" "$MT_DIR/vmail"; chmod 700 "$MT_DIR/vmail"

  # --- dovecot: a self-contained config, no /etc/dovecot includes ---
  cat > "$MT_DIR/etc/dovecot.conf" <<EOF
base_dir = $MT_DIR/run/dovecot
state_dir = $MT_DIR/lib/dovecot
instance_name = mailtest
log_path = $MT_DIR/log/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = yes
ssl_cert = <$MT_DIR/tls/cert.pem
ssl_key = <$MT_DIR/tls/key.pem
ssl_min_protocol = TLSv1.2
# loopback test server: allow LOGIN/AUTHENTICATE PLAIN without TLS as well
disable_plaintext_auth = no
# XOAUTH2 / OAUTHBEARER for the delegated-OAuth tests (issue 37): the oauth2 passdb below
auth_mechanisms = plain login xoauth2 oauthbearer
# no 2s penalty after a failed login (tests exercise bad passwords)
auth_failure_delay = 0
# loopback clients are trusted: no anvil auth penalty after the bad-password tests
login_trusted_networks = 127.0.0.0/8
auth_username_format = %Lu
first_valid_uid = $uid
last_valid_uid = $uid
mail_uid = $uid
mail_gid = $gid
mail_location = maildir:$MT_DIR/vmail/%d/%n/Maildir
mail_fsync = never
# Any user at any name logs in with the one test password and gets a home on first use: tests
# take a fresh user each, so nothing needs creating or cleaning up.
# The password passdb answers only the password mechanisms: otherwise an XOAUTH2 "token" equal
# to the test password would log in through it (Dovecot hands a bearer token to every passdb in
# turn as if it were a password).
passdb {
  driver = static
  args = password=$MT_PASSWORD
  mechanisms = plain login
}
# Bearer tokens are checked by introspection at the test provider (dovecot-oauth2.conf.ext).
passdb {
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = $MT_DIR/etc/dovecot-oauth2.conf.ext
}
# allow_all_users: LMTP delivers to any recipient (a static userdb cannot tell who exists).
userdb {
  driver = static
  args = uid=$uid gid=$gid home=$MT_DIR/vmail/%d/%n allow_all_users=yes
}
# The imap processes' titles name their user, so a test can kill the one serving it.
verbose_proctitle = yes
namespace inbox {
  inbox = yes
  separator = /
  mailbox Drafts {
    special_use = \\Drafts
    auto = subscribe
  }
  mailbox Sent {
    special_use = \\Sent
    auto = subscribe
  }
  mailbox Trash {
    special_use = \\Trash
    auto = subscribe
  }
  mailbox Junk {
    special_use = \\Junk
    auto = subscribe
  }
  mailbox Archive {
    special_use = \\Archive
    auto = subscribe
  }
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $MT_IMAP_PORT
  }
  inet_listener imaps {
    address = 127.0.0.1
    port = $MT_IMAPS_PORT
    ssl = yes
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = $MT_LMTP_PORT
  }
}
service auth {
  inet_listener sasl {
    address = 127.0.0.1
    port = $MT_AUTH_PORT
  }
}
service anvil {
  chroot =
  # disable the anvil auth penalty (2-15 s delay per IP after failed logins): tests use bad
  # passwords on purpose, and postfix SASL from 127.0.0.1 is not covered by login_trusted_networks
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
protocol lmtp {
  postmaster_address = postmaster@$MT_DOMAIN
}
protocol imap {
  mail_max_userip_connections = 100
}
EOF

  # RFC 7662 introspection, POSTed (token=...) with the client's credentials in the URL (Dovecot
  # sends them as HTTP basic auth). The provider adds `email` to an access token's answer; it is
  # the login name and must equal the SASL user (username_format, default %Lu, on both sides).
  # A token must carry mail.read: an ID-only or profile-only token reads no mail. (Dovecot 2.3.19
  # requires every scope this setting lists, not one of them, and applies it to IMAP and
  # submission alike, so it names the one scope every mailgate sign-in asks for.)
  cat > "$MT_DIR/etc/dovecot-oauth2.conf.ext" <<EOF
introspection_mode = post
introspection_url = http://dovecot:$MT_OAUTH_SECRET@127.0.0.1:$MT_OAUTH_PORT/token/introspection
username_attribute = email
active_attribute = active
active_value = true
scope = mail.read
timeout_msecs = 5000
EOF

  # --- postfix: alternate config directory, own queue, loopback only ---
  local pf=$MT_DIR/postfix
  cat > "$pf/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $MT_DIR/spool/postfix
data_directory = $MT_DIR/lib/postfix
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file_prefixes = $MT_DIR/log, /var, /dev/stdout
maillog_file = $MT_DIR/log/postfix.log
myhostname = mail.$MT_DOMAIN
mydomain = $MT_DOMAIN
myorigin = \$mydomain
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
local_recipient_maps =
local_transport = error:local delivery disabled
alias_maps =
alias_database =
biff = no
relayhost =
# Nothing may ever leave this machine: every non-test destination bounces.
default_transport = error:outbound mail disabled in test setup
relay_transport = error:outbound mail disabled in test setup
virtual_mailbox_domains = $MT_DOMAIN
# No virtual_mailbox_maps: an empty map makes every address at the domain a valid recipient.
virtual_transport = lmtp:inet:127.0.0.1:$MT_LMTP_PORT
smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject_unauth_destination
smtpd_recipient_restrictions =
smtpd_tls_cert_file = $MT_DIR/tls/cert.pem
smtpd_tls_key_file = $MT_DIR/tls/key.pem
smtpd_tls_security_level = may
smtpd_sasl_type = dovecot
smtpd_sasl_path = inet:127.0.0.1:$MT_AUTH_PORT
smtpd_sasl_auth_enable = no
smtpd_tls_auth_only = yes
message_size_limit = 52428800
delay_warning_time = 0
maximal_queue_lifetime = 1h
bounce_queue_lifetime = 1h
queue_run_delay = 10s
minimal_backoff_time = 5s
maximal_backoff_time = 20s
EOF
  cat > "$pf/master.cf" <<EOF
127.0.0.1:$MT_SMTP_PORT inet n - n - - smtpd
127.0.0.1:$MT_SUBMISSION_PORT inet n - n - - smtpd
  -o syslog_name=postfix/submission
  -o smtpd_tls_security_level=encrypt
  -o smtpd_sasl_auth_enable=yes
  -o smtpd_client_restrictions=permit_sasl_authenticated,reject
  -o smtpd_relay_restrictions=permit_sasl_authenticated,reject
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
EOF
  config_stamp > "$MT_DIR/etc/stamp"
  log "configured in $MT_DIR"
}

# What the running daemons were configured from: this script and the settings it reads. `up`
# reuses running daemons only when it matches (an edited script restarts them).
config_stamp() {
  { cat "${BASH_SOURCE[0]}"
    printf '%s\n' "$MT_DIR" "$MT_DOMAIN" "$MT_PASSWORD" "$MT_IMAP_PORT" "$MT_IMAPS_PORT" \
      "$MT_LMTP_PORT" "$MT_AUTH_PORT" "$MT_SMTP_PORT" "$MT_SUBMISSION_PORT" "$MT_OSUSER" \
      "$MT_OAUTH_PORT" "$MT_OAUTH_SECRET"
  } | sha256sum | cut -d' ' -f1
}

# Whether this instance (the daemons of this MT_DIR) runs with the current config and listens
# on every port: checked from pid files (root) and connects.
is_running() {
  [ -f "$MT_DIR/etc/stamp" ] && [ "$(cat "$MT_DIR/etc/stamp")" = "$(config_stamp)" ] || return 1
  # the pid files are root's own (0600): a non-root caller relies on the listeners alone
  local pid f
  for f in "$MT_DIR/run/dovecot/master.pid" "$MT_DIR/spool/postfix/pid/master.pid"; do
    [ -r "$f" ] || { [ "$(id -u)" = 0 ] && return 1; continue; }
    pid=$(tr -d ' ' < "$f") && [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  done
  local p
  for p in "$MT_IMAP_PORT" "$MT_IMAPS_PORT" "$MT_LMTP_PORT" "$MT_AUTH_PORT" "$MT_SMTP_PORT" "$MT_SUBMISSION_PORT"; do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || return 1
  done
}

# Ports held by something else (another checkout's instance, a system daemon): say whose.
check_ports_free() {
  local p busy=()
  for p in "$MT_IMAP_PORT" "$MT_IMAPS_PORT" "$MT_LMTP_PORT" "$MT_AUTH_PORT" "$MT_SMTP_PORT" "$MT_SUBMISSION_PORT"; do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && busy+=("$p")
  done
  [ ${#busy[@]} = 0 ] && return 0
  log "ports ${busy[*]} are taken by another process:"
  ss -ltnp 2>/dev/null | grep -E ":($(IFS='|'; echo "${busy[*]}"))\b" >&2 || true
  pgrep -a -f 'dovecot -c|postfix/sbin/master' >&2 || true
  die "stop that instance (its scripts/mailserver.sh down, or MT_DIR=<its dir> scripts/mailserver.sh down)"
}

wait_port() { # host port timeout_s
  local i=0 max=$(( $3 * 20 ))
  while ! (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
    i=$((i+1)); [ $i -ge $max ] && return 1; sleep 0.05
  done
}

cmd_start() {
  need_root
  [ -f "$MT_DIR/etc/stamp" ] && [ "$(cat "$MT_DIR/etc/stamp")" = "$(config_stamp)" ] || cmd_configure
  check_ports_free
  # Daemons must not inherit the caller's stdout/stderr: a CI step piping this script
  # (`| tee`, `$(...)`) would otherwise wait forever for EOF.
  dovecot -c "$MT_DIR/etc/dovecot.conf" </dev/null >/dev/null 2>>"$MT_DIR/log/dovecot.stderr" \
    || { cat "$MT_DIR/log/dovecot.stderr" >&2; die "dovecot failed (see $MT_DIR/log/dovecot.log)"; }
  # `postfix check` creates the queue tree; a failure before postlogd runs is only in the log file
  postfix -c "$MT_DIR/postfix" check </dev/null >/dev/null 2>&1 || die "postfix check failed (see $MT_DIR/log/postfix.log)"
  postfix -c "$MT_DIR/postfix" start </dev/null >/dev/null 2>&1 || die "postfix start failed (see $MT_DIR/log/postfix.log)"
  for p in "$MT_IMAP_PORT" "$MT_IMAPS_PORT" "$MT_LMTP_PORT" "$MT_AUTH_PORT" "$MT_SMTP_PORT" "$MT_SUBMISSION_PORT"; do
    wait_port 127.0.0.1 "$p" 10 || die "port $p not listening after 10s"
  done
  log "up: imap=$MT_IMAP_PORT imaps=$MT_IMAPS_PORT lmtp=$MT_LMTP_PORT smtp=$MT_SMTP_PORT submission=$MT_SUBMISSION_PORT"
}

# up: reuse a running instance with the current config; restart one with an older config.
cmd_up() {
  if is_running; then log "already up ($MT_DIR)"; return 0; fi
  need_root
  cmd_install
  cmd_stop
  cmd_configure
  cmd_start
  cmd_selftest >/dev/null || { cmd_selftest >&2 || true; die "selftest failed"; }
  log "selftest passed"
}

cmd_stop() {
  if [ -f "$MT_DIR/postfix/main.cf" ]; then postfix -c "$MT_DIR/postfix" stop >/dev/null 2>&1 || true; fi
  if [ -f "$MT_DIR/etc/dovecot.conf" ]; then doveadm -c "$MT_DIR/etc/dovecot.conf" stop >/dev/null 2>&1 || true; fi
  # wait for the processes and the listeners to go away
  local i pid left
  for i in $(seq 1 200); do
    left=0
    pid=$(cat "$MT_DIR/run/dovecot/master.pid" 2>/dev/null) && [ -d "/proc/$pid" ] && left=1
    pid=$(tr -d ' ' 2>/dev/null < "$MT_DIR/spool/postfix/pid/master.pid") && [ -n "$pid" ] && [ -d "/proc/$pid" ] && left=1
    for p in "$MT_IMAP_PORT" "$MT_IMAPS_PORT" "$MT_LMTP_PORT" "$MT_AUTH_PORT" "$MT_SMTP_PORT" "$MT_SUBMISSION_PORT"; do
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && left=1
    done
    [ $left = 0 ] && break
    sleep 0.05
  done
  [ $left = 0 ] || die "still running after 10 s (see cmd_status)"
  log "stopped"
}

cmd_purge() { cmd_stop; rm -rf "$MT_DIR"; log "removed $MT_DIR"; }

cmd_status() {
  ss -ltn "( sport = :$MT_IMAP_PORT or sport = :$MT_IMAPS_PORT or sport = :$MT_LMTP_PORT or sport = :$MT_AUTH_PORT or sport = :$MT_SMTP_PORT or sport = :$MT_SUBMISSION_PORT )"
}

cmd_env() {
  cat <<EOF
export MT_DIR=$MT_DIR
export MT_IMAP_HOST=127.0.0.1 MT_IMAP_PORT=$MT_IMAP_PORT MT_IMAPS_PORT=$MT_IMAPS_PORT
export MT_SMTP_PORT=$MT_SMTP_PORT MT_SUBMISSION_PORT=$MT_SUBMISSION_PORT MT_LMTP_PORT=$MT_LMTP_PORT
export MT_CA_PEM=$MT_DIR/tls/ca.pem MT_DOMAIN=$MT_DOMAIN MT_PASSWORD=$MT_PASSWORD
export MT_OAUTH_PORT=$MT_OAUTH_PORT MT_OAUTH_CLIENT=dovecot MT_OAUTH_SECRET=$MT_OAUTH_SECRET
EOF
}

cmd_selftest() {
  MT_DIR=$MT_DIR MT_DOMAIN=$MT_DOMAIN MT_PASSWORD=$MT_PASSWORD MT_IMAP_PORT=$MT_IMAP_PORT \
  MT_IMAPS_PORT=$MT_IMAPS_PORT MT_SMTP_PORT=$MT_SMTP_PORT MT_SUBMISSION_PORT=$MT_SUBMISSION_PORT \
  python3 - <<'PY'
import imaplib, smtplib, ssl, os, time, email.utils
from email.message import EmailMessage
E = os.environ
dom, pw = E["MT_DOMAIN"], E["MT_PASSWORD"]
# fresh users each run: any name at the domain logs in and gets a mailbox on first use
run = f"{os.getpid()}-{time.time_ns()}"
alice, bob = f"selftest-alice-{run}@{dom}", f"selftest-bob-{run}@{dom}"
ctx = ssl.create_default_context(cafile=f"{E['MT_DIR']}/tls/ca.pem")
ok = 0
def check(cond, what):
    global ok
    if not cond: raise SystemExit(f"FAIL: {what}")
    ok += 1; print(f"ok - {what}")

# 1. IMAP plain login on loopback, then APPEND / SEARCH / STORE / MOVE / EXPUNGE
m = imaplib.IMAP4("127.0.0.1", int(E["MT_IMAP_PORT"]))
check("STARTTLS" in m.capabilities, "IMAP advertises STARTTLS")
m.login(alice, pw)
caps = m.capability()[1][0].decode().split()
typ, data = m.list()
listed = b"\n".join(data)
check(all(f"\\{f}".encode() in listed for f in ("Drafts", "Sent", "Trash", "Junk", "Archive")),
      "a fresh user has the special-use folders Drafts Sent Trash Junk Archive")
check({"MOVE", "UIDPLUS", "CONDSTORE", "SPECIAL-USE", "IDLE"} <= set(caps), "IMAP caps after login include MOVE UIDPLUS CONDSTORE SPECIAL-USE IDLE")
msg = EmailMessage(); msg["From"] = bob; msg["To"] = alice; msg["Subject"] = "appended invoice 42"
msg["Message-ID"] = email.utils.make_msgid(domain=dom); msg["Date"] = email.utils.formatdate()
msg.set_content("hello from APPEND")
typ, data = m.append("INBOX", r"(\Seen)", imaplib.Time2Internaldate(time.time()), msg.as_bytes())
check(typ == "OK", f"APPEND -> {data[0].decode()[:60]}")
m.select("INBOX")
typ, data = m.uid("SEARCH", None, "SUBJECT", '"invoice 42"'); uids = data[0].split()
check(typ == "OK" and len(uids) >= 1, f"UID SEARCH SUBJECT -> {uids}")
uid = uids[-1].decode()
typ, _ = m.uid("STORE", uid, "+FLAGS", r"(\Flagged)"); check(typ == "OK", "UID STORE +FLAGS \\Flagged")
typ, data = m.uid("FETCH", uid, "(FLAGS)"); check(b"\\Flagged" in data[0], f"FETCH FLAGS -> {data[0].decode()}")
typ, data = m.uid("MOVE", uid, "Archive"); check(typ == "OK", "UID MOVE -> Archive")
typ, data = m.select("Archive"); check(int(data[0]) >= 1, f"Archive has {data[0].decode()} msg(s)")
m.logout()

# 2. STARTTLS on the IMAP port and implicit TLS on IMAPS, verified against the test CA
m = imaplib.IMAP4("127.0.0.1", int(E["MT_IMAP_PORT"])); m.starttls(ssl_context=ctx); m.login(alice, pw)
check(True, "IMAP STARTTLS + LOGIN (cert verified with ca.pem)"); m.logout()
m = imaplib.IMAP4_SSL("localhost", int(E["MT_IMAPS_PORT"]), ssl_context=ctx); m.login(bob, pw)
check(True, "IMAPS LOGIN as bob (cert verified, SNI localhost)"); m.logout()
m = imaplib.IMAP4("127.0.0.1", int(E["MT_IMAP_PORT"]))
try:
    m.login(alice, "wrong"); check(False, "bad password rejected")
except imaplib.IMAP4.error:
    check(True, "bad password rejected")
finally:
    m.shutdown()

# 2b. The OAuth mechanisms (issue 37) are offered, and the test password is no bearer token: the
# password passdb serves PLAIN/LOGIN only, the oauth2 one refuses it (or fails temporarily when no
# test provider runs on MT_OAUTH_PORT); either way no login.
m = imaplib.IMAP4("127.0.0.1", int(E["MT_IMAP_PORT"]))
check({"AUTH=XOAUTH2", "AUTH=OAUTHBEARER"} <= set(m.capabilities), "IMAP offers AUTH=XOAUTH2 and AUTH=OAUTHBEARER")
try:
    m.authenticate("XOAUTH2", lambda c: b"" if c else f"user={alice}\x01auth=Bearer {pw}\x01\x01".encode())
    check(False, "XOAUTH2 with the test password as the token is refused")
except imaplib.IMAP4.error:
    check(True, "XOAUTH2 with the test password as the token is refused")
finally:
    m.shutdown()

# 3. SMTP (port 25-style, no auth) delivery into alice's INBOX via LMTP
tag = f"smtp-{time.time_ns()}"
msg = EmailMessage(); msg["From"] = bob; msg["To"] = alice; msg["Subject"] = tag
msg["Message-ID"] = email.utils.make_msgid(domain=dom); msg.set_content("via smtp")
with smtplib.SMTP("127.0.0.1", int(E["MT_SMTP_PORT"])) as s:
    refused = s.send_message(msg)
check(refused == {}, "SMTP accepted message for alice")
# 4. submission: STARTTLS required, AUTH PLAIN as bob, to alice
tag2 = f"submission-{time.time_ns()}"
msg2 = EmailMessage(); msg2["From"] = bob; msg2["To"] = alice; msg2["Subject"] = tag2; msg2.set_content("via submission")
with smtplib.SMTP("127.0.0.1", int(E["MT_SUBMISSION_PORT"])) as s:
    s.ehlo(); check("auth" not in s.esmtp_features, "submission hides AUTH before STARTTLS")
    s.starttls(context=ctx); s.ehlo()
    check({"xoauth2", "oauthbearer"} <= set(s.esmtp_features.get("auth", "").lower().split()),
          "submission offers XOAUTH2 and OAUTHBEARER after STARTTLS")
    s.login(bob, pw); s.send_message(msg2)
check(True, "submission STARTTLS + AUTH + send")
# 5. mail to any other domain (example.com included) is refused at RCPT
try:
    with smtplib.SMTP("127.0.0.1", int(E["MT_SMTP_PORT"])) as s:
        s.sendmail(bob, ["someone@example.com"], "Subject: x\r\n\r\nx")
    check(False, "outside recipient refused")
except smtplib.SMTPRecipientsRefused as e:
    code, text = e.recipients["someone@example.com"]
    check(code == 550 and b"outbound mail disabled" in text, f"outside recipient refused: {code} {text.decode()}")

# 6. wait for both to land in INBOX
deadline = time.time() + 15
m = imaplib.IMAP4("127.0.0.1", int(E["MT_IMAP_PORT"])); m.login(alice, pw)
found = set()
while time.time() < deadline and len(found) < 2:
    m.select("INBOX")
    for t in (tag, tag2):
        typ, d = m.search(None, "HEADER", "Subject", t)
        if d[0].split(): found.add(t)
    if len(found) < 2: time.sleep(0.1)
check(found == {tag, tag2}, f"both SMTP and submission messages delivered to INBOX ({len(found)}/2)")
m.logout()
print(f"{ok} passed, 0 failed")
PY
}

case "${1:-}" in
  install) cmd_install ;;
  configure) cmd_configure ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  purge) cmd_purge ;;
  status) cmd_status ;;
  env) cmd_env ;;
  selftest) cmd_selftest ;;
  all|up) cmd_up ;;
  running) is_running ;;
  down) cmd_stop ;;
  *) echo "usage: $0 up|down|env|running|status|selftest|install|configure|start|stop|purge" >&2; exit 2 ;;
esac
