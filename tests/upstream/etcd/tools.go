// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package etcd pins the etcd server (and etcdctl) the Kubernetes control plane of the tests stores
// in; Debian 12's etcd is 3.4, older than kube-apiserver supports. Built by scripts/build-upstream.sh.
package etcd

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
