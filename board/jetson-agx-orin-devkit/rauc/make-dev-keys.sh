#!/usr/bin/env bash
# DEVELOPMENT-ONLY RAUC signing keys: a self-signed CA and a bundle signing
# certificate issued by it, written to OUTDIR (never into the repository).
# Units that trust this CA accept any bundle built on any developer's
# machine: a product ships its own CA (docs/image.md, "Signing keys").
#
#   bash make-dev-keys.sh OUTDIR [NAME]
#     OUTDIR/ca.cert.pem         the keyring ([keyring] path on the unit)
#     OUTDIR/ca.key.pem
#     OUTDIR/signing.cert.pem    rauc bundle --cert
#     OUTDIR/signing.key.pem     rauc bundle --key
set -euo pipefail
out=${1:?usage: make-dev-keys.sh OUTDIR [NAME]}
name=${2:-radar development}
mkdir -p "$out"
cd "$out"
umask 077
cat >openssl.cnf <<CNF
[req]
distinguished_name = dn
prompt = no
[dn]
O = Radar appliance DEVELOPMENT ONLY
CN = $name CA (development only)
[v3_ca]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[v3_signing]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF
openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -config openssl.cnf \
	-extensions v3_ca -keyout ca.key.pem -out ca.cert.pem 2>/dev/null
openssl req -newkey rsa:3072 -nodes -config openssl.cnf \
	-subj "/O=Radar appliance DEVELOPMENT ONLY/CN=$name bundle signing (development only)" \
	-keyout signing.key.pem -out signing.csr.pem 2>/dev/null
openssl x509 -req -in signing.csr.pem -CA ca.cert.pem -CAkey ca.key.pem \
	-CAcreateserial -days 3650 -extfile openssl.cnf -extensions v3_signing \
	-out signing.cert.pem 2>/dev/null
rm -f signing.csr.pem
openssl verify -CAfile ca.cert.pem signing.cert.pem >/dev/null
echo "make-dev-keys: DEVELOPMENT-ONLY keys in $out (CA: $(openssl x509 -noout -subject -in ca.cert.pem))"
