#!/bin/sh
# Makes the TLS files of an etcd cluster that only Convoy's coordinators use (deploy/README.md,
# "High availability on etcd"): an etcd CA of its own (never Convoy's cluster CA: that one
# signs every worker's certificate, and etcd would admit each worker), one certificate the
# members share (server and peer, so both serverAuth and clientAuth) and one client
# certificate for the coordinators.
#
#   etcd-certs.sh DIR [NAME...]
#
# NAME: every name or IP address the members are reached by (DNS names and IPv4/IPv6
# addresses; "*.domain" wildcards too). Without any, the names of the `ha` Kubernetes
# overlay's StatefulSet convoy-etcd in the namespace convoy. localhost and 127.0.0.1 are
# always added (etcdctl inside a member). For the three-machine layout:
#   etcd-certs.sh ./etcd-tls m1.example.net m2.example.net m3.example.net 10.0.0.1 10.0.0.2 10.0.0.3
#
# Writes DIR/ca.crt, DIR/ca.key (keep it offline: it only signs more of these), DIR/member.crt,
# DIR/member.key, DIR/client.crt, DIR/client.key (keys 0600). The client certificate has no
# subject alternative names: etcd then checks a client's address against none. Refuses to
# overwrite an existing DIR/ca.key. Needs openssl (1.1.1 or later).
set -eu

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [NAME...]" >&2
  exit 2
fi
dir=$1
shift
if [ $# -eq 0 ]; then
  set -- convoy-etcd convoy-etcd.convoy convoy-etcd.convoy.svc \
    convoy-etcd.convoy.svc.cluster.local
  for i in 0 1 2; do
    set -- "$@" "convoy-etcd-$i.convoy-etcd" "convoy-etcd-$i.convoy-etcd.convoy" \
      "convoy-etcd-$i.convoy-etcd.convoy.svc" "convoy-etcd-$i.convoy-etcd.convoy.svc.cluster.local"
  done
  set -- "$@" "*.convoy-etcd.convoy.svc.cluster.local"
fi
days=${ETCD_CERT_DAYS:-1825}

mkdir -p "$dir"
if [ -e "$dir/ca.key" ]; then
  echo "$0: $dir/ca.key exists: not making another CA (remove $dir to start again)" >&2
  exit 1
fi

san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  case $name in
    *:*) san="$san,IP:$name" ;;  # IPv6
    *[!0-9.]*) san="$san,DNS:$name" ;;
    *) san="$san,IP:$name" ;;
  esac
done

umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

key "$dir/ca.key"
openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 -subj "/CN=convoy-etcd-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$dir/ca.crt"

# sign NAME SUBJECT EXTENSIONS: DIR/NAME.key and DIR/NAME.crt, signed by the CA.
sign() {
  key "$dir/$1.key"
  openssl req -new -key "$dir/$1.key" -subj "$2" -out "$dir/$1.csr"
  printf '%s\n' "$3" >"$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -sha256 -days "$days" -extfile "$dir/$1.ext" -out "$dir/$1.crt" 2>/dev/null
  rm -f "$dir/$1.csr" "$dir/$1.ext"
}
sign member "/CN=convoy-etcd-member" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
sign client "/CN=convoy-coordinator" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
rm -f "$dir/ca.srl"
chmod 0644 "$dir/ca.crt" "$dir/member.crt" "$dir/client.crt"
echo "$dir: ca.crt ca.key member.crt member.key client.crt client.key (members: $san)"
