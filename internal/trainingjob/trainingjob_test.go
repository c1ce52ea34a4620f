package trainingjob

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotashare/quotashare"
)

func TestNeed(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    []quotashare.Demand
		err     string
	}{
		{`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2}}`, []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}, ""},
		{`{"ResourceConfig":{"InstanceGroups":[{"InstanceType":"b","InstanceCount":1,"InstanceGroupName":"x"},{"InstanceType":"a","InstanceCount":2,"InstanceGroupName":"y"},{"InstanceType":"b","InstanceCount":3,"InstanceGroupName":"z"}]}}`,
			[]quotashare.Demand{{InstanceType: "a", Count: 2}, {InstanceType: "b", Count: 4}}, ""},
		{`{}`, nil, "ResourceConfig: is required"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":0}}`, nil, "InstanceCount: must be at least 1, got 0"},
		{`{"ResourceConfig":{"InstanceCount":1}}`, nil, "InstanceType: is required"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1,"InstanceGroups":[{"InstanceType":"t","InstanceCount":1}]}}`, nil, "not both"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":"1"}}`, nil, "must be a SageMaker CreateTrainingJob request in JSON"},
		{`{} {}`, nil, "must be one JSON object"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1}}]`, nil, "serviceRequestPayload: must be one JSON object, found \"]\" after it"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1}} }`, nil, "found \"}\" after it"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1}}` + "\n  ", []quotashare.Demand{{InstanceType: "t", Count: 1}}, ""},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"StoppingCondition":{"MaxRuntimeInSeconds":-1}}`, nil,
			"serviceRequestPayload.StoppingCondition.MaxRuntimeInSeconds: -1 must be from 1 to 2147483647"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"StoppingCondition":{"MaxRuntimeInSeconds":18446744074}}`, nil,
			"MaxRuntimeInSeconds: 18446744074 must be from 1"},
		{`{"ResourceConfig":{"InstanceGroups":[{"InstanceType":"t","InstanceCount":9223372036854775807},{"InstanceType":"t","InstanceCount":2}]}}`, nil,
			"InstanceGroups[0].InstanceCount: 9223372036854775807 is more than 1048576"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":4294967297}}`, nil, "InstanceCount: 4294967297 is more than 1048576"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"Environment":{"SM_NUM_GPUS=8":"x"}}`, nil,
			`serviceRequestPayload.Environment: the name "SM_NUM_GPUS=8" must be non-empty, without '=' or NUL`},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"Environment":{"":"x"}}`, nil, `the name "" must be non-empty`},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"Environment":{"A\u0000B":"x"}}`, nil, "without '=' or NUL"},
		{`{"ResourceConfig":{"InstanceType":"t","InstanceCount":1},"Environment":{"A":"x\u0000y"}}`, nil, `Environment["A"]: the value must not hold a NUL`},
		{strings.Repeat(" ", MaxPayload+1), nil, "more than the 10240 allowed"},
	} {
		var need []quotashare.Demand
		r, err := Parse(tc.payload)
		if err == nil {
			need, err = Need(r)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%.60s: error %v, want %q", tc.payload, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%.60s: %v", tc.payload, err)
		} else if diff := cmp.Diff(tc.want, need); diff != "" {
			t.Errorf("%.60s (-want +got):\n%s", tc.payload, diff)
		}
	}
}

func TestLocalPath(t *testing.T) {
	r, err := Parse(`{"InputDataConfig":[
		{"ChannelName":"a","DataSource":{"S3DataSource":{"S3Uri":"file:///data/a"}}},
		{"ChannelName":"b","DataSource":{"S3DataSource":{"S3Uri":"s3://bucket/b"}}},
		{"ChannelName":"c","DataSource":{"FileSystemDataSource":{"DirectoryPath":"/mnt/c"}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r.InputDataConfig {
		got = append(got, c.LocalPath())
	}
	if diff := cmp.Diff([]string{"/data/a", "", "/mnt/c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzParse: any payload either is refused with a message naming serviceRequestPayload,
// or gives a need sorted by type, one entry a type, each count at least 1.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2}}`,
		`{"ResourceConfig":{"InstanceGroups":[{"InstanceType":"b","InstanceCount":1},{"InstanceType":"b","InstanceCount":2}]}}`, `null`, `[]`, `{"ResourceConfig":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		r, err := Parse(payload)
		if err == nil {
			var need []quotashare.Demand
			need, err = Need(r)
			if err == nil {
				for i, d := range need {
					if d.Count < 1 || d.InstanceType == "" || i > 0 && need[i-1].InstanceType >= d.InstanceType {
						t.Fatalf("need %v from %q", need, payload)
					}
				}
				return
			}
		}
		if !strings.HasPrefix(err.Error(), "serviceRequestPayload") {
			t.Fatalf("error %q does not name the field", err)
		}
	})
}
