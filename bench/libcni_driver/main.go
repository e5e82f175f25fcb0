// SPDX-License-Identifier: Apache-2.0
//
// The runtime side of bench/cni_bench's libcni part: one long-lived process, as containerd or
// CRI-O is, that calls libcni's AddNetworkList/DelNetworkList in process and times each call with
// Go's monotonic clock. Built against Debian's libcni v1.1.2 in GOPATH mode, as
// e2e/build-driver.sh builds the e2e driver (bench/CMakeLists.txt).
//
// Usage:  libcni_driver NAME=CONFLIST_FILE...
//
// Environment: CNI_PATH (plugin search path, colon separated), BENCH_CACHE_DIR (libcni's result
// cache; default libcni's own, /var/lib/cni).
//
// Requests come on stdin, one per line: "add|del NAME NETNS CONTAINERID IFNAME". Each gets one
// line on stdout: "ok NANOSECONDS FIRST_IP" (FIRST_IP "-" for DEL or a result without addresses)
// or "err NANOSECONDS MESSAGE" (the message on one line).
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func main() {
	lists := map[string]*libcni.NetworkConfigList{}
	for _, arg := range os.Args[1:] {
		name, file, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "libcni_driver: argument %q is not NAME=CONFLIST_FILE\n", arg)
			os.Exit(2)
		}
		list, err := libcni.ConfListFromFile(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "libcni_driver: %s: %v\n", file, err)
			os.Exit(2)
		}
		lists[name] = list
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(os.Getenv("CNI_PATH")), os.Getenv("BENCH_CACHE_DIR"), nil)

	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 5 || lists[f[1]] == nil || (f[0] != "add" && f[0] != "del") {
			fmt.Fprintf(out, "err 0 bad request %q\n", in.Text())
			out.Flush()
			continue
		}
		list := lists[f[1]]
		rt := &libcni.RuntimeConf{ContainerID: f[3], NetNS: f[2], IfName: f[4]}
		ip := "-"
		start := time.Now()
		var err error
		if f[0] == "add" {
			var res types.Result
			res, err = cni.AddNetworkList(context.Background(), list, rt)
			elapsed := time.Since(start)
			if err == nil {
				if cur, ce := current.NewResultFromResult(res); ce == nil && len(cur.IPs) > 0 {
					ip = cur.IPs[0].Address.String()
				}
			}
			reply(out, elapsed, err, ip)
			continue
		}
		err = cni.DelNetworkList(context.Background(), list, rt)
		reply(out, time.Since(start), err, ip)
	}
}

func reply(out *bufio.Writer, elapsed time.Duration, err error, ip string) {
	if err != nil {
		fmt.Fprintf(out, "err %d %s\n", elapsed.Nanoseconds(), strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Fprintf(out, "ok %d %s\n", elapsed.Nanoseconds(), ip)
	}
	out.Flush()
}
