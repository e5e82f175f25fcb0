// SPDX-License-Identifier: Apache-2.0

// Command kubelet-dra is the kubelet's DRA side, run by the kubelet's own code since no kubelet runs
// in the tests: the plugin manager (pkg/kubelet/pluginmanager) watching --registry-dir, with the DRA
// manager's handler for DRAPlugin sockets, and the DRA manager (pkg/kubelet/cm/dra) with its
// checkpoint (dra_manager_state) in --state-dir, started as pkg/kubelet/kubelet.go and
// cm/container_manager_linux.go start them. It reads commands from stdin, one a line, and answers
// each with one JSON line on stdout; logs go to stderr (-v N for more).
//
//	kubelet-dra --kubeconfig FILE --node NODE --registry-dir DIR --state-dir DIR
//
//	wait-registered DRIVER SECONDS  {"ok":true} once the plugin manager has registered DRIVER
//	prepare NS POD                  PrepareResources(pod read from the API)
//	cdi NS POD CONTAINER            {"ok":true,"cdiDevices":[...]}: GetResources, the CDI device IDs
//	                                the kubelet hands the runtime for the container
//	unprepare NS POD [UID]          UnprepareResources(pod read from the API); when the pod is gone,
//	                                a pod NS/POD with UID whose spec.resourceClaims are the claims
//	                                the checkpoint holds for UID (the manager finds a pod's claims
//	                                through its spec, nothing else)
//	quit (or EOF)                   exits 0
//
// Failures answer {"ok":false,"error":"..."} with the manager's error text.
//
// What the manager requires before it prepares a claim of a pod (manager.go, prepareResources):
//   - the pod's spec.resourceClaims[] names it by resourceClaimName (or, by
//     resourceClaimTemplateName, through status.resourceClaimStatuses, and then the claim must be
//     owned by the pod);
//   - the claim has status.allocation (its devices.results[].driver choose the drivers called);
//   - status.reservedFor has an entry with the pod's UID ({resource: pods, name, uid});
//   - every driver of the results is registered (else "DRA driver X is not registered").
//
// cdi answers only the claims the container names in resources.claims[] (with request: the devices
// whose prepare result names that request, or names none). As the kubelet does, the manager
// unprepares the claims of pods that are not active on the node every 60 s (the first time 60 s
// after start, once the pod list has synced): active is in the API with spec.nodeName=NODE and not
// Succeeded or Failed, so a test's pod names the node. At start the DRA manager deletes the node's
// ResourceSlices (every driver's; it needs the Node object for that, and retries until it exists),
// and those of a driver 30 s after its plugin went away. A claim prepared before a restart is
// prepared again by the next prepare (the checkpoint does not say "prepared"), and v1.36.3 then
// lists its CDI devices twice (kubernetes/kubernetes#140471, fixed by #140274 after v1.36.3).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
)

// The name the DRA manager gives its checkpoint (pkg/kubelet/cm/dra/manager.go).
const draManagerCheckpoint = "dra_manager_state"

type answer struct {
	OK         bool     `json:"ok"`
	Error      string   `json:"error,omitempty"`
	CDIDevices []string `json:"cdiDevices,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	node := flag.String("node", "", "the node's name")
	registryDir := flag.String("registry-dir", "", "the plugin registration directory the plugin manager watches")
	stateDir := flag.String("state-dir", "", "the DRA manager's checkpoint directory")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *node == "" || *registryDir == "" || *stateDir == "" {
		fmt.Fprintln(os.Stderr, "usage: kubelet-dra --kubeconfig FILE --node NODE --registry-dir DIR --state-dir DIR")
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.FromContext(ctx)
	fail := func(err error) { logger.Error(err, "kubelet-dra"); os.Exit(1) }

	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		fail(err)
	}

	// The kubelet's active pods and sources: the pods bound to the node, as its API server source.
	pods := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(
		func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + *node }))
	podInformer := pods.Core().V1().Pods()
	podInformer.Informer() // registered before Start
	pods.Start(ctx.Done())
	activePods := func() []*v1.Pod {
		all, _ := podInformer.Lister().List(labels.Everything())
		var active []*v1.Pod
		for _, p := range all {
			if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
				active = append(active, p)
			}
		}
		return active
	}
	sourcesReady := config.NewSourcesReady(func(sets.Set[string]) bool { return podInformer.Informer().HasSynced() })
	getNode := func(ctx context.Context) (*v1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, *node, metav1.GetOptions{})
	}

	draManager, err := dra.NewManager(logger, client, *stateDir)
	if err != nil {
		fail(err)
	}
	if err := draManager.Start(ctx, activePods, getNode, sourcesReady); err != nil {
		fail(err)
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartStructuredLogging(0)
	recorder := events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet-dra", Host: *node})
	pluginManager := pluginmanager.NewPluginManager(*registryDir, recorder)
	pluginManager.AddHandler(pluginwatcherapi.DRAPlugin, draManager.GetWatcherHandler())
	go pluginManager.Run(ctx, sourcesReady, ctx.Done())

	getPod := func(ns, name string) (*v1.Pod, error) {
		return client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	}
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		args := strings.Fields(in.Text())
		if len(args) == 0 {
			continue
		}
		if args[0] == "quit" {
			break
		}
		var a answer
		err := run(ctx, args, draManager, getPod, *stateDir, &a)
		if err != nil {
			a = answer{Error: err.Error()}
		} else {
			a.OK = true
		}
		_ = out.Encode(a)
	}
	cancel()
}

func run(ctx context.Context, args []string, m *dra.Manager, getPod func(ns, name string) (*v1.Pod, error), stateDir string, a *answer) error {
	switch {
	case args[0] == "wait-registered" && len(args) == 3:
		seconds, err := strconv.ParseFloat(args[2], 64)
		if err != nil {
			return err
		}
		plugins := m.GetWatcherHandler().(*draplugin.DRAPluginManager)
		deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
		for {
			_, err := plugins.GetPlugin(args[1])
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	case args[0] == "prepare" && len(args) == 3:
		pod, err := getPod(args[1], args[2])
		if err != nil {
			return err
		}
		return m.PrepareResources(ctx, pod)
	case args[0] == "cdi" && len(args) == 4:
		pod, err := getPod(args[1], args[2])
		if err != nil {
			return err
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if c.Name == args[3] {
				info, err := m.GetResources(pod, &c)
				if err != nil {
					return err
				}
				a.CDIDevices = []string{}
				for _, d := range info.CDIDevices {
					a.CDIDevices = append(a.CDIDevices, d.Name)
				}
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s has no container %s", args[1], args[2], args[3])
	case args[0] == "unprepare" && (len(args) == 3 || len(args) == 4):
		pod, err := getPod(args[1], args[2])
		if apierrors.IsNotFound(err) && len(args) == 4 {
			pod, err = podFromCheckpoint(stateDir, args[1], args[2], types.UID(args[3]))
		}
		if err != nil {
			return err
		}
		return m.UnprepareResources(ctx, pod)
	}
	return errors.New("unknown command or wrong arguments: " + strings.Join(args, " "))
}

// podFromCheckpoint is a pod NS/NAME with UID whose spec names the claims the DRA manager's
// checkpoint holds for UID, read with the manager's own state package.
func podFromCheckpoint(stateDir, ns, name string, uid types.UID) (*v1.Pod, error) {
	checkpointer, err := state.NewCheckpointer(stateDir, draManagerCheckpoint)
	if err != nil {
		return nil, err
	}
	checkpoint, err := checkpointer.GetOrCreate()
	if err != nil {
		return nil, err
	}
	claims, err := checkpoint.GetClaimInfoStateList()
	if err != nil {
		return nil, err
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
	for _, claim := range claims {
		if claim.Namespace == ns && claim.PodUIDs.Has(string(uid)) {
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims,
				v1.PodResourceClaim{Name: claim.ClaimName, ResourceClaimName: &claim.ClaimName})
		}
	}
	return pod, nil
}
