package kubeexec

// The attempts' output: kept from the Pods before they are deleted, and served.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quotashare/quotashare/internal/attemptdir"
	corev1 "k8s.io/api/core/v1"
)

// saveLogs copies the Pods' logs to LogDir, for reading once the Pods are gone.
func (x *Executor) saveLogs(attemptID string, pods map[string]*corev1.Pod) {
	if x.cfg.LogDir == "" {
		return
	}
	for h, p := range pods {
		if p.Spec.NodeName == "" {
			continue // never ran: no log
		}
		limit := int64(maxSavedLog)
		rc, err := x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: Container, LimitBytes: &limit}).Stream(x.ctx)
		if err != nil {
			continue
		}
		dir := filepath.Join(x.cfg.LogDir, attemptID, h)
		if err := os.MkdirAll(dir, 0o755); err == nil {
			if f, err := os.Create(filepath.Join(dir, "stdout.log.tmp")); err == nil {
				_, cerr := io.Copy(f, rc)
				if errors.Join(cerr, f.Close()) == nil {
					os.Rename(filepath.Join(dir, "stdout.log.tmp"), filepath.Join(dir, "stdout.log"))
				}
			}
		}
		rc.Close()
	}
}

// OpenLog returns an instance's output: the saved copy once the attempt is over, else
// the Pod's log through the API. Kubernetes keeps one stream per container, stdout and
// stderr together; it is served as stdout.
func (x *Executor) OpenLog(ctx context.Context, attemptID, host, stream string) (io.ReadCloser, error) {
	if stream != "stdout" {
		return nil, fmt.Errorf("stream %s: the Kubernetes executor keeps stdout and stderr as one log; ask for stdout", stream)
	}
	if x.cfg.LogDir != "" {
		if f, err := os.Open(filepath.Join(x.cfg.LogDir, attemptID, host, "stdout.log")); err == nil {
			return f, nil
		}
	}
	return x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).GetLogs(PodName(attemptID, host), &corev1.PodLogOptions{Container: Container}).Stream(ctx)
}

// Forget removes the attempts' saved logs.
func (x *Executor) Forget(attemptIDs []string) error {
	if x.cfg.LogDir == "" {
		return nil
	}
	return attemptdir.Remove(x.cfg.LogDir, attemptIDs)
}

// Prune removes the saved logs of attempts whose job is gone.
func (x *Executor) Prune(keep func(attemptID string) bool) (int, error) {
	if x.cfg.LogDir == "" {
		return 0, nil
	}
	return attemptdir.Prune(x.cfg.LogDir, keep)
}
