// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package kubernetes pins the Kubernetes control plane the tests run (go.mod: k8s.io/kubernetes and
// its k8s.io/* staging modules, replaced by their published versions). Nothing here is compiled into
// ibcni; scripts/build-upstream.sh builds these commands from the module cache.
package kubernetes

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
