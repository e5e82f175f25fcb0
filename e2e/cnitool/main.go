// SPDX-License-Identifier: Apache-2.0
//
// A libcni driver with upstream cnitool's command line, for the ibcni e2e suite.
//
// It follows containernetworking/cni's cnitool (cnitool/cnitool.go at v1.1.2) and builds offline
// against Debian's golang-github-appc-cni-dev (libcni v1.1.2) in GOPATH mode; see
// ../build-driver.sh. libcni 1.1.2 implements spec <= 1.0.0 and has no GC/STATUS, so neither
// has this driver.
//
// Usage:  cnitool add|check|del NETWORK NETNS
//
// Environment (as upstream):
//
//	NETCONFPATH  directory of *.conf/*.conflist/*.json files (default /etc/cni/net.d)
//	CNI_PATH     plugin search path (colon separated)
//	CAP_ARGS     JSON object -> RuntimeConf.CapabilityArgs
//	CNI_ARGS     "K=V;K2=V2" -> RuntimeConf.Args
//	CNI_IFNAME   interface name in the netns (default eth0; set-but-empty is passed as is)
//
// The container ID is "cnitool-" + hex(sha512(absolute netns path)[:10]). ADD prints the result
// JSON on stdout. Any failure prints the error on stderr and exits 1.
//
// Differences from upstream, all deliberate and small: an unknown command prints the usage and
// exits 1 (upstream silently exits 0), and the usage also goes with exit status 1 (as upstream).
package main

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// Protocol parameters are passed to the plugins via OS environment variables.
const (
	EnvCNIPath        = "CNI_PATH"
	EnvNetDir         = "NETCONFPATH"
	EnvCapabilityArgs = "CAP_ARGS"
	EnvCNIArgs        = "CNI_ARGS"
	EnvCNIIfname      = "CNI_IFNAME"

	DefaultNetDir = "/etc/cni/net.d"

	CmdAdd   = "add"
	CmdCheck = "check"
	CmdDel   = "del"
)

// parseArgs splits CNI_ARGS exactly as upstream cnitool does: ';'-separated K=V pairs, neither
// side empty, no '=' inside a value.
func parseArgs(args string) ([][2]string, error) {
	var result [][2]string

	pairs := strings.Split(args, ";")
	for _, pair := range pairs {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 || kv[0] == "" || kv[1] == "" {
			return nil, fmt.Errorf("invalid CNI_ARGS pair %q", pair)
		}
		result = append(result, [2]string{kv[0], kv[1]})
	}
	return result, nil
}

// containerID is upstream cnitool's rule: the same netns path always gives the same ID.
func containerID(netns string) string {
	s := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

func main() {
	if len(os.Args) < 4 {
		usage()
	}
	cmd := os.Args[1]
	if cmd != CmdAdd && cmd != CmdCheck && cmd != CmdDel {
		usage()
	}

	netdir := os.Getenv(EnvNetDir)
	if netdir == "" {
		netdir = DefaultNetDir
	}
	netconf, err := libcni.LoadConfList(netdir, os.Args[2])
	if err != nil {
		exit(err)
	}

	var capabilityArgs map[string]interface{}
	if v := os.Getenv(EnvCapabilityArgs); len(v) > 0 {
		if err = json.Unmarshal([]byte(v), &capabilityArgs); err != nil {
			exit(err)
		}
	}

	var cniArgs [][2]string
	if v := os.Getenv(EnvCNIArgs); len(v) > 0 {
		if cniArgs, err = parseArgs(v); err != nil {
			exit(err)
		}
	}

	ifName, ok := os.LookupEnv(EnvCNIIfname)
	if !ok {
		ifName = "eth0"
	}

	netns, err := filepath.Abs(os.Args[3])
	if err != nil {
		exit(err)
	}

	cninet := libcni.NewCNIConfig(filepath.SplitList(os.Getenv(EnvCNIPath)), nil)
	rt := &libcni.RuntimeConf{
		ContainerID:    containerID(netns),
		NetNS:          netns,
		IfName:         ifName,
		Args:           cniArgs,
		CapabilityArgs: capabilityArgs,
	}

	switch cmd {
	case CmdAdd:
		result, err := cninet.AddNetworkList(context.TODO(), netconf, rt)
		if result != nil {
			_ = result.Print()
		}
		exit(err)
	case CmdCheck:
		exit(cninet.CheckNetworkList(context.TODO(), netconf, rt))
	case CmdDel:
		exit(cninet.DelNetworkList(context.TODO(), netconf, rt))
	}
}

func usage() {
	exe := filepath.Base(os.Args[0])
	fmt.Fprintf(os.Stderr, "%s: Add, check, or remove network interfaces from a network namespace\n", exe)
	fmt.Fprintf(os.Stderr, "  %s add   <net> <netns>\n", exe)
	fmt.Fprintf(os.Stderr, "  %s check <net> <netns>\n", exe)
	fmt.Fprintf(os.Stderr, "  %s del   <net> <netns>\n", exe)
	os.Exit(1)
}

func exit(e error) {
	if e == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s\n", e)
	os.Exit(1)
}
