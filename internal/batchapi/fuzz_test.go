package batchapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/dispatch"
	"github.com/quotashare/quotashare/internal/sqlite"
)

type noExec struct{}

func (noExec) Check(*quotashare.TrainingRequest) error { return nil }
func (noExec) Start(quotashare.AttemptSpec) error      { return nil }
func (noExec) Stop(string) error                       { return nil }
func (noExec) Recover([]quotashare.AttemptSpec) error  { return nil }
func (noExec) Close() error                            { return nil }

// FuzzRequest sends any body to any operation: the answer is 200 or a 400
// ClientException with a message, always JSON; never a ServerException or a panic.
func FuzzRequest(f *testing.F) {
	st, err := sqlite.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	e, err := dispatch.Open(dispatch.Config{Store: st, Control: control.Config{Logf: func(string, ...any) {}}})
	if err != nil {
		f.Fatal(err)
	}
	if err := e.Run(noExec{}); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(); st.Close() })
	h := New(e, ARNs{Region: "us-east-1", Account: "000000000000"})
	for _, seed := range []struct{ op, body string }{
		{"createschedulingpolicy", `{"name":"p","quotaSharePolicy":{"idleResourceAssignmentStrategy":"FIFO"}}`},
		{"createserviceenvironment", `{"serviceEnvironmentName":"e","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"capacityUnit":"t","maxCapacity":2}]}`},
		{"createjobqueue", `{"jobQueueName":"q","priority":1,"jobQueueType":"SAGEMAKER_TRAINING","schedulingPolicyArn":"arn:aws:batch:us-east-1:000000000000:scheduling-policy/p","serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"e"}]}`},
		{"createquotashare", `{"quotaShareName":"a","jobQueue":"q","capacityLimits":[{"capacityUnit":"t","maxCapacity":1}],"resourceSharingConfiguration":{"strategy":"LEND_AND_BORROW","borrowLimit":100},"preemptionConfiguration":{"inSharePreemption":"ENABLED"}}`},
		{"submitservicejob", `{"jobName":"j","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","serviceRequestPayload":"{\"ResourceConfig\":{\"InstanceType\":\"t\",\"InstanceCount\":1}}","retryStrategy":{"attempts":2}}`},
		{"listservicejobs", `{"jobQueue":"q","jobStatus":"RUNNABLE","maxResults":1,"nextToken":"bzox"}`},
		{"updatequotashare", `{"quotaShareArn":"arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/a","capacityLimits":[{"capacityUnit":"t","maxCapacity":5}]}`},
		{"getjobqueuesnapshot", `{"jobQueue":"q"}`},
		{"updateservicejob", `{"jobId":"x","schedulingPriority":-1}`},
		{"describejobqueues", `{"jobQueues":[null]}`},
		{"terminateservicejob", `[]`},
	} {
		f.Add(seed.op, seed.body)
	}
	f.Fuzz(func(t *testing.T, op, body string) {
		if strings.ContainsAny(op, "/?#%. ") || strings.IndexFunc(op, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			return // not a path a client can send, or one net/http redirects before the API sees it
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/"+op, strings.NewReader(body)))
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("%s %q: status %d %s", op, body, w.Code, w.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %q: answer is not a JSON object: %s", op, body, w.Body)
		}
		if w.Code == http.StatusBadRequest && (out["__type"] != "ClientException" || out["message"] == "") {
			t.Fatalf("%s %q: error answer %s", op, body, w.Body)
		}
	})
}
