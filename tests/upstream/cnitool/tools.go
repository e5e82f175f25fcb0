// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package cnitool pins upstream cnitool (libcni of the same release), the conformance driver that
// speaks CNI spec 1.1.0's GC and STATUS. Built by scripts/build-upstream.sh.
package cnitool

import (
	_ "github.com/containernetworking/cni/cnitool"
)
