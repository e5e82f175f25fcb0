#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Writes a test PKI into DIR (http_client_test): ca.{crt,key} and the server's and a client's
# certificates signed by it (server.{crt,key} for 127.0.0.1 and localhost, client.{crt,key} with
# CN ibcni-test-client), and other-ca.crt, a CA that signed none of them.
#   make_test_pki.sh DIR
set -eu
dir=$1
cd "$dir"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=ibcni-test-ca 2>/dev/null
openssl req -x509 $ec -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=ibcni-other-ca 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
printf 'extendedKeyUsage=clientAuth\n' >client.ext
for who in server client; do
  openssl req -new $ec -keyout $who.key -out $who.csr -subj /CN=ibcni-test-$who 2>/dev/null
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile $who.ext -out $who.crt 2>/dev/null
done
