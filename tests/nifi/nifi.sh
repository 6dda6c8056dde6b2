#!/usr/bin/env bash
# Starts, stops and reports on a throw-away NiFi instance built from the cached assembly.
#
#   nifi.sh start  [--port P] [--instance-dir D] [--extensions NAR_OR_DIR ...] [--timeout S] [--keep]
#                  (--keep: restart an existing instance directory as it is: flow, repositories, NARs)
#                  [--heap SIZE] [--mgmt-port M] [--scheduling-timeout DURATION]
#                  (--scheduling-timeout: nifi.processor.scheduling.timeout, how long NiFi lets a processor's
#                   @OnScheduled run before it interrupts it, such as "5 secs"; NiFi's default is 1 min)
#                  [--sensitive-key K] (nifi.sensitive.props.key; default: a random one. Cluster nodes need the same)
#                  cluster node (all of these together; ports are the caller's free ports):
#                  [--cluster-protocol-port C --cluster-load-balance-port L --zookeeper-connect "127.0.0.1:Z1,..."
#                   --embedded-zookeeper-id N --embedded-zookeeper-servers "127.0.0.1:Q1:E1;127.0.0.1:Z1,..."
#                   [--cluster-candidates K] [--cluster-election-wait "30 secs"]]
#                  secured (HTTPS, a login, authorization; the login provider is a test-only one of ours):
#                  [--secure [--tls-dir T] [--login-dir L]]
#   nifi.sh stop   [--port P | --instance-dir D] [--grace S]
#   nifi.sh status [--port P | --instance-dir D]
#
# start: runs assemble.sh (a no-op when the cache is current), wipes and recreates the instance
#   directory (default tests/nifi/.work/instances/port-<P>): conf copy, repositories, state, logs,
#   work, extensions. Given NARs (files, or directories whose *.nar are taken) are copied into its
#   extensions/. NiFi is started with java in the background (no nifi-bootstrap: it is not
#   resolvable here), its PID is written to <instance>/nifi.pid, and the script waits until
#   GET http://127.0.0.1:<P>/nifi-api/flow/about answers, then prints the elapsed time.
#   Cluster node: nifi.cluster.is.node=true on 127.0.0.1 with the given protocol and load-balance ports,
#   unsecured cluster protocol, NiFi's embedded ZooKeeper as peer N of the listed quorum (conf/zookeeper.properties,
#   state/zookeeper/myid), the ZooKeeper cluster state provider, and a flow election that ends as soon as
#   K nodes (default: every listed ZooKeeper server) voted; heartbeats every 2 s (8 missed: disconnected),
#   ZooKeeper sessions of 10 s. A clustered node answers /flow/about only once it has joined the cluster,
#   so start returns when this node is connected (or timeout). The cluster protocol listener binds every
#   interface (NiFi has no setting for its address); everything else binds 127.0.0.1.
#   Secured (--secure): HTTPS on 127.0.0.1:<P> only (no HTTP port), a PKCS12 keystore and truststore in
#   <instance>/conf/tls/ with a certificate (CN=kinesnow-nifi, or CN=kinesnow-node-<N> for cluster node N; SAN
#   IP:127.0.0.1 and DNS:localhost; server and client auth) signed by the CA in T (ca.pem, ca.key: made with
#   openssl on first use; default <instance>/ca; cluster nodes share one T). Login: NiFi's single-user login
#   providers NAR is not served by the Maven repository reachable here, so the login is a test-only login
#   identity provider of ours (tests/nifi/test-login-nar; NiFi's single-user provider is not what this runs) with
#   the same REST login (POST /nifi-api/access/token, username and password, bearer token): one user, the username
#   and password in L/username and L/password (made on first use, mode 600; default <instance>/login; cluster
#   nodes share one L), the password as a salted PBKDF2-HMAC-SHA-256 hash this script writes with python3.
#   Authorizer: NiFi's file-based managed authorizer (users.xml, authorizations.xml) with the login's username as
#   Initial Admin; a cluster node's also with every node's DN as a Node Identity, and the cluster protocol and
#   load balancing over TLS (nifi.cluster.protocol.is.secure=true) with the same keystore and truststore. The
#   admin of a new secured NiFi grants itself the root process group's policies (NiFi's administration guide: the
#   root group's id is not known before the flow exists): tests/lib (NiFiClient.grant_root_policies, called by
#   NiFiInstance.start and NiFiCluster.start) does that through the REST API. Readiness: a bearer token from
#   POST /nifi-api/access/token, then /flow/about with it, trusting T/ca.pem. instance.env then has
#   URL=https://..., CA_FILE and LOGIN_DIR.
#   Logs: <instance>/logs/nifi-app.log (full logger names; stdout/stderr of the JVM: <instance>/logs/nifi-stdout.log).
# stop: TERM to exactly the PID in <instance>/nifi.pid (after checking it is this instance's NiFi),
#   KILL after --grace seconds (default 30), and waits until the HTTP port is closed.
# status: exit 0 = running and answering, 1 = process alive but API not answering, 3 = not running.
#
# Environment: KINESNOW_CACHE (assembly cache), NIFI_JAVA_OPTS (extra JVM arguments, e.g. a debug agent).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../build/java-home.sh"

die() { echo "nifi.sh: $*" >&2; exit 1; }
say() { echo "nifi.sh: $*" >&2; }

cmd="${1:-}"; [ $# -gt 0 ] && shift
port=8080; port_given=0; instance=""; timeout=180; heap=1g; mgmt_port=""; grace=30; keep=0; scheduling_timeout=""
extensions=()
sensitive_key=""; protocol_port=""; lb_port=""; zk_connect=""; zk_id=""; zk_servers=""; candidates=""
election_wait="1 min"
secure=0; tls_dir=""; login_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --port) port="$2"; port_given=1; shift 2 ;;
        --instance-dir) instance="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --heap) heap="$2"; shift 2 ;;
        --mgmt-port) mgmt_port="$2"; shift 2 ;;
        --scheduling-timeout) scheduling_timeout="$2"; shift 2 ;;
        --grace) grace="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        --sensitive-key) sensitive_key="$2"; shift 2 ;;
        --cluster-protocol-port) protocol_port="$2"; shift 2 ;;
        --cluster-load-balance-port) lb_port="$2"; shift 2 ;;
        --zookeeper-connect) zk_connect="$2"; shift 2 ;;
        --embedded-zookeeper-id) zk_id="$2"; shift 2 ;;
        --embedded-zookeeper-servers) zk_servers="$2"; shift 2 ;;
        --cluster-candidates) candidates="$2"; shift 2 ;;
        --cluster-election-wait) election_wait="$2"; shift 2 ;;
        --secure) secure=1; shift ;;
        --tls-dir) tls_dir="$2"; shift 2 ;;
        --login-dir) login_dir="$2"; shift 2 ;;
        --extensions)
            shift
            while [ $# -gt 0 ] && [[ "$1" != --* ]]; do extensions+=("$1"); shift; done ;;
        -h|--help) sed -n '2,54p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done
[[ "$port" =~ ^[0-9]+$ ]] || die "--port must be a number"
clustered=0
if [ -n "$protocol_port$lb_port$zk_connect$zk_id$zk_servers" ]; then
    clustered=1
    for v in protocol_port lb_port zk_id; do
        [[ "${!v}" =~ ^[0-9]+$ ]] || die "cluster node: --${v//_/-} must be a number (got '${!v}')"
    done
    [ -n "$zk_connect" ] && [ -n "$zk_servers" ] || die "cluster node: --zookeeper-connect and --embedded-zookeeper-servers are required"
fi
[ -n "$instance" ] || instance="$here/.work/instances/port-$port"
mkdir -p "$(dirname "$instance")"
instance="$(cd "$(dirname "$instance")" && pwd)/$(basename "$instance")"
marker="$instance/.kinesnow-nifi-instance"
pidfile="$instance/nifi.pid"

# Port and security recorded by 'start' win over the defaults for stop/status/--keep with only --instance-dir.
if [ -f "$instance/instance.env" ]; then
    [ "$port_given" = 1 ] || port="$(sed -n 's/^PORT=//p' "$instance/instance.env")"
    if [ "$cmd" != start ] || [ "$keep" = 1 ]; then
        if grep -q '^SECURE=1$' "$instance/instance.env"; then
            secure=1
            tls_dir="$(sed -n 's/^TLS_DIR=//p' "$instance/instance.env")"
            login_dir="$(sed -n 's/^LOGIN_DIR=//p' "$instance/instance.env")"
        fi
    fi
fi
[ -n "$tls_dir" ] || tls_dir="$instance/ca"
[ -n "$login_dir" ] || login_dir="$instance/login"
if [ "$secure" = 1 ]; then scheme=https; else scheme=http; fi
url="$scheme://127.0.0.1:$port/nifi-api/flow/about"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# Up: /flow/about answers (secured: with a bearer token from the test login, trusting our CA).
api_up() {
    if [ "$secure" = 0 ]; then curl -sf -o /dev/null --max-time 3 "$url"; return; fi
    local token
    token="$(curl -sf --max-time 5 --cacert "$tls_dir/ca.pem" --data-urlencode "username@$login_dir/username" \
        --data-urlencode "password@$login_dir/password" "$scheme://127.0.0.1:$port/nifi-api/access/token")" || return 1
    curl -sf -o /dev/null --max-time 3 --cacert "$tls_dir/ca.pem" -H @- "$url" <<< "Authorization: Bearer $token"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The PID from the pid file, but only if that process is this instance's NiFi (guards against reuse).
our_pid() {
    [ -f "$pidfile" ] || return 1
    local pid; pid="$(cat "$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    local cmdline; cmdline="$(tr '\0' ' ' < "/proc/$pid/cmdline")"
    [[ "$cmdline" == *org.apache.nifi.NiFi* && "$cmdline" == *"$instance/conf/nifi.properties"* ]] || return 1
    echo "$pid"
}

# Replace (or append) key=value in a properties file.
set_prop() {
    local file="$1" key="$2" value="$3" tmp
    tmp="$(mktemp "$file.XXXX")"
    awk -v k="$key" -v v="$value" 'BEGIN { done = 0 }
        index($0, k "=") == 1 { print k "=" v; done = 1; next } { print }
        END { if (!done) print k "=" v }' "$file" > "$tmp"
    mv "$tmp" "$file"
}

# ---- secured NiFi (--secure) ------------------------------------------------------------------------------------

# A file holding random URL-safe text (no newline), mode 600, made only if absent or empty.
random_file() {
    [ -s "$1" ] || (umask 077; python3 -c 'import secrets, sys; sys.stdout.write(sys.argv[1] + secrets.token_urlsafe(18))' \
        "${2:-}" > "$1.tmp" && mv "$1.tmp" "$1")
}

# The CA that signs every certificate of this instance (or of every node of a cluster sharing --tls-dir).
ensure_ca() {
    mkdir -p "$tls_dir"
    (
        flock 8
        [ -s "$tls_dir/ca.pem" ] && [ -s "$tls_dir/ca.key" ] && exit 0
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj "/CN=kinesnow test CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -keyout "$tls_dir/ca.key.tmp" -out "$tls_dir/ca.pem.tmp" 2>/dev/null || exit 1
        mv "$tls_dir/ca.key.tmp" "$tls_dir/ca.key"
        mv "$tls_dir/ca.pem.tmp" "$tls_dir/ca.pem"
    ) 8>"$tls_dir/.lock" || die "could not make the CA in $tls_dir (openssl)"
}

# The test login (shared by a cluster's nodes through --login-dir): username and password files.
ensure_login() {
    mkdir -p "$login_dir"
    (
        flock 8
        [ -s "$login_dir/username" ] || (umask 077; printf 'kinesnow-admin' > "$login_dir/username")
        random_file "$login_dir/password"
    ) 8>"$login_dir/.lock"
}

# This instance's key and certificate (signed by the CA) in a PKCS12 keystore, the CA in a PKCS12 truststore.
issue_certificate() {
    local cn="$1" dir="$instance/conf/tls"
    mkdir -p "$dir"
    random_file "$dir/keystore.password"
    random_file "$dir/truststore.password"
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" > "$dir/node.ext"
    (umask 077
     openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$cn" -keyout "$dir/node.key" -out "$dir/node.csr" 2>/dev/null &&
     openssl x509 -req -sha256 -days 30 -in "$dir/node.csr" -CA "$tls_dir/ca.pem" -CAkey "$tls_dir/ca.key" \
         -set_serial "0x$(openssl rand -hex 16)" -extfile "$dir/node.ext" -out "$dir/node.pem" 2>/dev/null &&
     openssl pkcs12 -export -name nifi-key -in "$dir/node.pem" -inkey "$dir/node.key" -certfile "$tls_dir/ca.pem" \
         -out "$dir/keystore.p12" -passout "file:$dir/keystore.password" &&
     keytool -importcert -noprompt -alias kinesnow-test-ca -file "$tls_dir/ca.pem" -keystore "$dir/truststore.p12" \
         -storetype PKCS12 -storepass:file "$dir/truststore.password" >/dev/null 2>&1) || die "could not issue the certificate of $cn"
    rm -f "$dir/node.key" "$dir/node.csr" "$dir/node.ext"
}

# The DN of cluster node N (its certificate's subject; the managed authorizer's Node Identity N).
node_dn() { echo "CN=kinesnow-node-$1"; }  # issue_certificate kinesnow-node-N gives node N this subject

# Our test-only login identity provider (tests/nifi/test-login-nar: NiFi's single-user login providers NAR is not
# served here) with the login's username and a salted PBKDF2-HMAC-SHA-256 hash of its password, written here.
configure_test_login() {
    local props="$1" nar hash
    nar="$("$here/test-login-nar/build.sh")"
    mkdir -p "$instance/lib-test-login"
    cp "$nar" "$instance/lib-test-login/"
    set_prop "$props" nifi.nar.library.directory.test-login "$instance/lib-test-login"
    set_prop "$props" nifi.security.user.login.identity.provider test-login-provider
    hash="$(python3 -c 'import base64, hashlib, secrets, sys
password = open(sys.argv[1], encoding="utf-8").read().encode("utf-8")
salt, rounds = secrets.token_bytes(16), 100000
key = hashlib.pbkdf2_hmac("sha256", password, salt, rounds)
print("pbkdf2-sha256$%d$%s$%s" % (rounds, base64.b64encode(salt).decode(), base64.b64encode(key).decode()))' \
        "$login_dir/password")" || die "could not hash the login's password"
    cat > "$instance/conf/login-identity-providers.xml" <<XML
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<!-- Secured test instance (tests/nifi/nifi.sh start, secure option): kinesnow's test-only login provider. -->
<loginIdentityProviders>
    <provider>
        <identifier>test-login-provider</identifier>
        <class>com.kinesnow.tests.login.TestLoginIdentityProvider</class>
        <property name="Username">$(cat "$login_dir/username")</property>
        <property name="Password Hash">$hash</property>
    </provider>
</loginIdentityProviders>
XML
}

# NiFi's file-based managed authorizer with the login's username as Initial Admin; a cluster node's also knows every
# node's DN (Initial User Identity and Node Identity).
configure_authorizer() {
    local props="$1" file="$instance/conf/authorizers.xml"
    set_prop "$props" nifi.security.user.authorizer managed-authorizer
    local admin; admin="$(cat "$login_dir/username")"
    local -a servers=(); [ "$clustered" = 0 ] || IFS=',' read -r -a servers <<< "$zk_servers"
    local users="" nodes="" i
    for i in "${!servers[@]}"; do
        users+="        <property name=\"Initial User Identity $((i + 2))\">$(node_dn $((i + 1)))</property>"$'\n'
        nodes+="        <property name=\"Node Identity $((i + 1))\">$(node_dn $((i + 1)))</property>"$'\n'
    done
    cat > "$file" <<XML
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<!-- Secured test instance (tests/nifi/nifi.sh start, secure option): NiFi's file-based managed authorizer. -->
<authorizers>
    <userGroupProvider>
        <identifier>file-user-group-provider</identifier>
        <class>org.apache.nifi.authorization.FileUserGroupProvider</class>
        <property name="Users File">./conf/users.xml</property>
        <property name="Initial User Identity 1">$admin</property>
$users    </userGroupProvider>
    <accessPolicyProvider>
        <identifier>file-access-policy-provider</identifier>
        <class>org.apache.nifi.authorization.FileAccessPolicyProvider</class>
        <property name="User Group Provider">file-user-group-provider</property>
        <property name="Authorizations File">./conf/authorizations.xml</property>
        <property name="Initial Admin Identity">$admin</property>
$nodes        <property name="Node Group"></property>
    </accessPolicyProvider>
    <authorizer>
        <identifier>managed-authorizer</identifier>
        <class>org.apache.nifi.authorization.StandardManagedAuthorizer</class>
        <property name="Access Policy Provider">file-access-policy-provider</property>
    </authorizer>
</authorizers>
XML
}

# Fresh secured instance: HTTPS only, keystore and truststore, test login provider, managed authorizer.
configure_security() {
    local props="$1" dir="$instance/conf/tls"
    ensure_ca
    ensure_login
    if [ "$clustered" = 1 ]; then issue_certificate "kinesnow-node-$zk_id"; else issue_certificate kinesnow-nifi; fi
    set_prop "$props" nifi.web.http.host ""
    set_prop "$props" nifi.web.http.port ""
    set_prop "$props" nifi.web.https.host 127.0.0.1
    set_prop "$props" nifi.web.https.port "$port"
    set_prop "$props" nifi.security.keystore "$dir/keystore.p12"
    set_prop "$props" nifi.security.keystoreType PKCS12
    set_prop "$props" nifi.security.keystorePasswd "$(cat "$dir/keystore.password")"
    set_prop "$props" nifi.security.keyPasswd "$(cat "$dir/keystore.password")"
    set_prop "$props" nifi.security.truststore "$dir/truststore.p12"
    set_prop "$props" nifi.security.truststoreType PKCS12
    set_prop "$props" nifi.security.truststorePasswd "$(cat "$dir/truststore.password")"
    set_prop "$props" nifi.remote.input.secure true
    configure_test_login "$props"
    configure_authorizer "$props"
}

# Cluster node settings (fresh instance only): cluster properties, embedded ZooKeeper peer, ZooKeeper state provider.
configure_cluster_node() {
    local props="$1" conf="$instance/conf"
    local -a servers
    IFS=',' read -r -a servers <<< "$zk_servers"
    [ "$zk_id" -ge 1 ] && [ "$zk_id" -le "${#servers[@]}" ] || die "--embedded-zookeeper-id $zk_id is not in 1..${#servers[@]}"
    set_prop "$props" nifi.cluster.is.node true
    if [ "$secure" = 1 ]; then set_prop "$props" nifi.cluster.protocol.is.secure true
    else set_prop "$props" nifi.cluster.protocol.is.secure false; fi
    set_prop "$props" nifi.cluster.node.address 127.0.0.1
    set_prop "$props" nifi.cluster.node.protocol.port "$protocol_port"
    set_prop "$props" nifi.cluster.load.balance.host 127.0.0.1
    set_prop "$props" nifi.cluster.load.balance.port "$lb_port"
    set_prop "$props" nifi.cluster.flow.election.max.candidates "${candidates:-${#servers[@]}}"
    set_prop "$props" nifi.cluster.flow.election.max.wait.time "$election_wait"
    set_prop "$props" nifi.zookeeper.connect.string "$zk_connect"
    set_prop "$props" nifi.zookeeper.connect.timeout "10 secs"
    set_prop "$props" nifi.zookeeper.session.timeout "10 secs"
    set_prop "$props" nifi.cluster.protocol.heartbeat.interval "2 sec"
    set_prop "$props" nifi.state.management.embedded.zookeeper.start true
    set_prop "$props" nifi.state.management.embedded.zookeeper.properties ./conf/zookeeper.properties
    set_prop "$props" nifi.state.management.provider.cluster zk-provider
    local i
    for i in "${!servers[@]}"; do echo "server.$((i + 1))=${servers[$i]}" >> "$conf/zookeeper.properties"; done
    mkdir -p "$instance/state/zookeeper"
    echo "$zk_id" > "$instance/state/zookeeper/myid"
    # The ZooKeeper cluster provider next to the local one (standalone instances keep the local one only).
    local tmp; tmp="$(mktemp "$conf/state-management.xml.XXXX")"
    awk -v zk="$zk_connect" '/<\/stateManagement>/ {
            print "    <cluster-provider>"
            print "        <id>zk-provider</id>"
            print "        <class>org.apache.nifi.controller.state.providers.zookeeper.ZooKeeperStateProvider</class>"
            print "        <property name=\"Connect String\">" zk "</property>"
            print "        <property name=\"Root Node\">/nifi</property>"
            print "        <property name=\"Session Timeout\">10 seconds</property>"
            print "        <property name=\"Access Control\">Open</property>"
            print "    </cluster-provider>"
        } { print }' "$conf/state-management.xml" > "$tmp"
    mv "$tmp" "$conf/state-management.xml"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

do_stop() {
    local pid
    if ! pid="$(our_pid)"; then
        say "not running (instance $instance)"
        rm -f "$pidfile"
        return 0
    fi
    local t0; t0="$(now)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(date +%s) + grace ))
    while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        say "PID $pid still alive after ${grace}s, sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    while port_open "$port"; do sleep 0.1; done
    rm -f "$pidfile"
    say "stopped PID $pid in $(elapsed "$t0") s"
}

do_status() {
    local pid
    if ! pid="$(our_pid)"; then echo "stopped (instance $instance)"; return 3; fi
    if api_up; then
        echo "running pid=$pid url=$scheme://127.0.0.1:$port/nifi instance=$instance"; return 0
    fi
    echo "starting-or-unresponsive pid=$pid instance=$instance"; return 1
}

do_start() {
    if pid="$(our_pid)"; then die "instance $instance already running (PID $pid); stop it first"; fi
    port_open "$port" && die "127.0.0.1:$port is already in use"
    local home; home="$("$here/assemble.sh")"
    local version; version="$(tr -d '[:space:]' < "$here/nifi-version")"

    local props="$instance/conf/nifi.properties"
    if [ "$keep" = 1 ]; then
        # Restart after a stop or crash: same flow, repositories and extensions.
        [ -f "$marker" ] || die "--keep: $instance is not an existing nifi.sh instance directory"
    else
        # Fresh instance directory. Refuse to wipe a directory this script did not create.
        if [ -e "$instance" ]; then
            if [ -f "$marker" ] || [ -z "$(ls -A "$instance")" ]; then
                rm -rf "$instance"
            else
                die "$instance exists and is not a nifi.sh instance directory; not wiping it"
            fi
        fi
        mkdir -p "$instance"/{logs,extensions,work,state}
        touch "$marker"
        cp -r "$home/conf" "$instance/conf"

        set_prop "$props" nifi.web.http.host 127.0.0.1
        set_prop "$props" nifi.web.http.port "$port"
        set_prop "$props" nifi.nar.library.directory "$home/lib"
        set_prop "$props" nifi.nar.library.autoload.directory "$instance/extensions"
        [ -n "$sensitive_key" ] || sensitive_key="$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
        set_prop "$props" nifi.sensitive.props.key "$sensitive_key"
        [ "$clustered" = 0 ] || configure_cluster_node "$props"
        [ "$secure" = 0 ] || configure_security "$props"
        [ -z "$scheduling_timeout" ] || set_prop "$props" nifi.processor.scheduling.timeout "$scheduling_timeout"

        local n=0 src f
        for src in "${extensions[@]}"; do
            if [ -d "$src" ]; then
                for f in "$src"/*.nar; do [ -f "$f" ] && cp "$f" "$instance/extensions/" && n=$((n + 1)); done
            elif [ -f "$src" ]; then
                cp "$src" "$instance/extensions/"; n=$((n + 1))
            else
                die "--extensions: $src is neither a file nor a directory"
            fi
        done
        [ "${#extensions[@]}" -eq 0 ] || [ "$n" -gt 0 ] || die "--extensions given but no .nar found in: ${extensions[*]}"
    fi

    [ -n "$mgmt_port" ] || mgmt_port="$(free_port)"
    local cp="" jar
    for jar in "$home"/lib/*.jar; do cp="$cp$jar:"; done
    cp="$cp$instance/conf"

    # JVM arguments: what NiFi's bootstrap would pass (class path, log dir, properties path, management
    # server address, bootstrap.conf java.arg.*), plus --add-opens for Xodus on Java 21+.
    local -a jvm=(
        "-Xms256m" "-Xmx$heap"
        "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED"
        "--class-path" "$cp"
        "-Dorg.apache.nifi.bootstrap.config.log.dir=$instance/logs"
        "-Dnifi.properties.file.path=$props"
        "-Dorg.apache.nifi.bootstrap.config.file=$instance/conf/bootstrap.conf"
        "-Dorg.apache.nifi.management.server.address=127.0.0.1:$mgmt_port"
        "-Djava.awt.headless=true"
        "-Dsun.net.http.allowRestrictedHeaders=true"
        "-Djava.protocol.handler.pkgs=sun.net.www.protocol"
        "-Djavax.security.auth.useSubjectCredsOnly=true"
        "-DlogbackDisableServletContainerInitializer=true"
    )
    # shellcheck disable=SC2206
    [ -z "${NIFI_JAVA_OPTS:-}" ] || jvm+=(${NIFI_JAVA_OPTS})

    # A restart (--keep) of a cluster node keeps the cluster lines of its first start.
    local kept_cluster=""
    [ "$keep" = 0 ] || kept_cluster="$(grep -E '^(CLUSTER_|ZOOKEEPER_)' "$instance/instance.env" 2>/dev/null || true)"
    {
        echo "PORT=$port"
        echo "MGMT_PORT=$mgmt_port"
        echo "NIFI_HOME=$home"
        echo "NIFI_VERSION=$version"
        echo "URL=$scheme://127.0.0.1:$port/nifi-api"
        if [ "$secure" = 1 ]; then
            echo "SECURE=1"
            echo "TLS_DIR=$tls_dir"
            echo "CA_FILE=$tls_dir/ca.pem"
            echo "LOGIN_DIR=$login_dir"
        fi
        if [ "$clustered" = 1 ]; then
            echo "CLUSTER_PROTOCOL_PORT=$protocol_port"
            echo "CLUSTER_LOAD_BALANCE_PORT=$lb_port"
            echo "ZOOKEEPER_CONNECT=$zk_connect"
            echo "ZOOKEEPER_ID=$zk_id"
        fi
        [ -z "$kept_cluster" ] || echo "$kept_cluster"
    } > "$instance/instance.env"

    local t0; t0="$(now)"
    (cd "$instance" && exec java "${jvm[@]}" org.apache.nifi.NiFi \
        </dev/null >"$instance/logs/nifi-stdout.log" 2>&1) &
    local pid=$!
    echo "$pid" > "$pidfile"
    echo "PID=$pid" >> "$instance/instance.env"
    say "started NiFi $version PID $pid, instance $instance, waiting for $url (timeout ${timeout}s)"

    local deadline; deadline=$(( $(date +%s) + timeout ))
    while :; do
        if api_up; then
            echo "NiFi up on $scheme://127.0.0.1:$port/nifi-api after $(elapsed "$t0") s (PID $pid, instance $instance)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "NiFi exited during startup; last log lines:"
            tail -n 40 "$instance/logs/nifi-app.log" "$instance/logs/nifi-stdout.log" >&2 2>/dev/null || true
            rm -f "$pidfile"
            exit 1
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            say "NiFi did not answer within ${timeout}s; stopping it. Log: $instance/logs/nifi-app.log"
            grace=10 do_stop
            exit 1
        fi
        sleep 0.5
    done
}

case "$cmd" in
    start) do_start ;;
    stop) do_stop ;;
    status) do_status ;;
    *) die "usage: nifi.sh start|stop|status [--port P] [--instance-dir D] [--extensions NAR_OR_DIR ...] [--timeout S] [--heap SIZE] [--grace S]" ;;
esac
