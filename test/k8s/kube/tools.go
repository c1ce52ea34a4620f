//go:build tools

// Package tools pins kube-apiserver, kube-controller-manager and kube-scheduler
// for the Kubernetes executor's integration tests.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
