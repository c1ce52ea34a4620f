//go:build tools

// Package tools pins etcd for the Kubernetes executor's integration tests.
package tools

import _ "go.etcd.io/etcd/server/v3"
