package batchapi

import "net/http"

// Access is who may call an operation.
type Access int

const (
	// AccessRead: every principal (Describe, List, the snapshot, the dry run).
	AccessRead Access = iota
	// AccessJob: an admin, or a team on jobs of its own shares.
	AccessJob
	// AccessAdmin: an admin only.
	AccessAdmin
)

// Operation is one operation of the API: its name, which is its route (POST /v1/NAME) and
// its metrics label; who may call it; and its handler. Routes, authorization and metrics
// are all built from Operations.
type Operation struct {
	Name    string
	Access  Access
	handler func(h *Handler) http.HandlerFunc
}

// Operations are the API's operations (the tags operations, on /v1/tags/ARN, are apart:
// TagsOperation).
var Operations = []Operation{
	{"createschedulingpolicy", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.createPolicy) }},
	{"updateschedulingpolicy", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.updatePolicy) }},
	{"describeschedulingpolicies", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.describePolicies) }},
	{"listschedulingpolicies", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.listPolicies) }},
	{"deleteschedulingpolicy", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.deletePolicy) }},
	{"createserviceenvironment", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.createEnv) }},
	{"updateserviceenvironment", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.updateEnv) }},
	{"describeserviceenvironments", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.describeEnvs) }},
	{"deleteserviceenvironment", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.deleteEnv) }},
	{"createjobqueue", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.createQueue) }},
	{"updatejobqueue", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.updateQueue) }},
	{"describejobqueues", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.describeQueues) }},
	{"deletejobqueue", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.deleteQueue) }},
	{"createquotashare", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.createShare) }},
	{"updatequotashare", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.updateShare) }},
	{"describequotashare", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.describeShare) }},
	{"listquotashares", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.listShares) }},
	{"deletequotashare", AccessAdmin, func(h *Handler) http.HandlerFunc { return op(h.deleteShare) }},
	{"submitservicejob", AccessJob, func(h *Handler) http.HandlerFunc { return op(h.submit) }},
	{"describeservicejob", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.describeJob) }},
	{"listservicejobs", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.listJobs) }},
	{"updateservicejob", AccessJob, func(h *Handler) http.HandlerFunc { return op(h.updateJob) }},
	{"terminateservicejob", AccessJob, func(h *Handler) http.HandlerFunc { return op(h.terminateJob) }},
	{"getjobqueuesnapshot", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.snapshot) }},
	{"previewchanges", AccessRead, func(h *Handler) http.HandlerFunc { return op(h.preview) }}, // quotashare's own (preview.go)
}

// TagsOperation is the metrics label of the tags operations (TagResource, UntagResource,
// ListTagsForResource on /v1/tags/ARN): an admin's, but for the list, which is a read.
const TagsOperation = "tags"

// access is each operation's Access, by name.
var access = func() map[string]Access {
	m := map[string]Access{}
	for _, o := range Operations {
		m[o.Name] = o.Access
	}
	return m
}()

// OperationNames are the operations' names, and TagsOperation: every value the metrics'
// operation label may take.
func OperationNames() []string {
	names := []string{TagsOperation}
	for _, o := range Operations {
		names = append(names, o.Name)
	}
	return names
}
