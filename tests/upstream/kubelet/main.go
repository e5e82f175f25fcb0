// SPDX-License-Identifier: Apache-2.0

// Command kubelet-checkpoint writes the kubelet's device manager checkpoint
// (<dir>/kubelet_internal_checkpoint) with the kubelet's own code, as the kubelet writes it after a
// device plugin's Allocate: k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint for the
// content and its checksum, pkg/kubelet/checkpointmanager for the file. No kubelet runs in the tests;
// this is its part that Multus reads (the deviceID of a pod's resource). Then it reads the file back
// through the same code and verifies the checksum.
//
//	kubelet-checkpoint DIR POD_UID CONTAINER RESOURCE NUMA_NODE DEVICE_ID...
package main

import (
	"fmt"
	"os"
	"strconv"

	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

// The name the device manager gives its checkpoint (pkg/kubelet/cm/devicemanager/types.go).
const kubeletDeviceManagerCheckpoint = "kubelet_internal_checkpoint"

func main() {
	if len(os.Args) < 7 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-checkpoint DIR POD_UID CONTAINER RESOURCE NUMA_NODE DEVICE_ID...")
		os.Exit(2)
	}
	dir, uid, container, resource := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	numa, err := strconv.ParseInt(os.Args[5], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-checkpoint: NUMA_NODE %q: %v\n", os.Args[5], err)
		os.Exit(2)
	}
	devices := os.Args[6:]
	entries := []checkpoint.PodDevicesEntry{{
		PodUID:        uid,
		ContainerName: container,
		ResourceName:  resource,
		DeviceIDs:     checkpoint.DevicesPerNUMA{numa: devices},
	}}
	manager, err := checkpointmanager.NewCheckpointManager(dir)
	if err == nil {
		err = manager.CreateCheckpoint(kubeletDeviceManagerCheckpoint, checkpoint.New(entries, map[string][]string{resource: devices}))
	}
	if err == nil {
		readBack := checkpoint.New(nil, nil)
		err = manager.GetCheckpoint(kubeletDeviceManagerCheckpoint, readBack) // verifies the checksum
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-checkpoint: %v\n", err)
		os.Exit(1)
	}
}
