// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package multus pins Multus CNI's thin plugin (cmd/multus), the meta-plugin that reads a pod's
// networks annotation and its NetworkAttachmentDefinitions from the API server, delegates to ibcni
// and writes the pod's network-status back. Built by scripts/build-upstream.sh.
package multus

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
)
