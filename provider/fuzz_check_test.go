package provider

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// fuzzGates are every gate's type token name.
var fuzzGates = []string{"CrdReady", "ResourceReady", "RolloutReady", "ServiceReady", "ExternalSecretReady", "NodesReady",
	"SecretReady", "CertificateReady", "WebhookReady", "HttpReady", "HelmReleaseReady", "AdmissionReady", "ImageReady", "ChartReady"}

// fuzzMarker starts every input value the fuzz test marks secret; no message may contain it.
const fuzzMarker = "SECRETVALUE"

// fuzzInputs turns a JSON document into a gate's inputs: an object's keys are the inputs, and
// each string or number leaf whose position's bit is set in mask becomes a secret holding
// fuzzMarker (the rest of the document is left as the fuzzer wrote it).
func fuzzInputs(doc string, mask uint64) (map[string]property.Value, bool) {
	var top map[string]any
	if json.Unmarshal([]byte(doc), &top) != nil || top == nil {
		return nil, false
	}
	leaf := 0
	var conv func(v any) property.Value
	conv = func(v any) property.Value {
		switch x := v.(type) {
		case map[string]any:
			m := map[string]property.Value{}
			for k, e := range x {
				m[k] = conv(e)
			}
			return property.New(property.NewMap(m))
		case []any:
			a := make([]property.Value, len(x))
			for i, e := range x {
				a[i] = conv(e)
			}
			return property.New(a)
		case string, float64:
			leaf++
			if mask&(1<<(uint(leaf)%64)) != 0 {
				return property.New(fmt.Sprintf("%s-%v", fuzzMarker, x)).WithSecret(true)
			}
			if s, ok := x.(string); ok {
				return property.New(s)
			}
			return property.New(x.(float64))
		case bool:
			return property.New(x)
		}
		return property.New(property.Null)
	}
	out := map[string]property.Value{}
	for k, v := range top {
		out[k] = conv(v)
	}
	return out, true
}

var (
	fuzzServerOnce sync.Once
	fuzzServer     integration.Server
)

// FuzzCheck drives every gate's Check with random inputs: it must never panic, and no value
// marked secret may appear in any message, as the engine would print it (engineText). Check
// needs no cluster; TestMain starts none when fuzzing (see main_test.go).
func FuzzCheck(f *testing.F) {
	seeds := []struct {
		gate uint8
		doc  string
	}{
		{8, `{"validatingWebhookConfiguration":"v","probe":{"apiVersion":"v1","kind":"ConfigMap"}}`},
		{8, `{"validatingWebhookConfiguration":"v","probe":{"kind":"Secret","metadata":{"name":"p"},"stringData":{"password":"x"}}}`},
		{8, `{"service":{"namespace":"n","name":"s","port":70000},"probe":{"apiVersion":"v1","kind":"List","items":[]},"expect":"object.x"}`},
		{9, `{"url":"http://user:pass@127.0.0.1/?token=abc","bodyRegex":"(","expectedStatus":"999"}`},
		{9, `{"service":{"namespace":"n","name":"s","path":"../../../secrets/x","scheme":"gopher","port":"99999"}}`},
		{11, `{"objects":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"../x","namespace":"../y"},"data":{"k":"v"}}],"expect":"lists.range(100000000).size() > 0"}`},
		{11, `{"objects":"not a list","consecutive":1.5}`},
		{1, `{"apiVersion":"v1","kind":"Secret","name":"db","jsonPath":"{.data.password}","value":"aHVudGVyMg==","regex":"("}`},
		{1, `{"apiVersion":"v1","kind":"Pod","selector":"a=b","minCount":0,"cel":"lists.range(100000000).size() > 0","timeout":"9999999999h"}`},
		{5, `{"minCount":1.5,"selector":"a b c"}`},
		{10, `{"name":"r","probe":{"apiVersion":"v1","data":{"k":"v"}}}`},
		{12, `{"image":"::bad","pullSecret":{"name":"x"},"caCertificate":"nope"}`},
		{0, `{"names":["a/b"],"conversionProbes":[{"x":1}]}`},
		{3, `{"name":"s","port":"70000","minReadyEndpoints":0}`},
		{6, `{"name":"s","requiredKeys":["","a/b"]}`},
		{7, `{"name":"c","minValidity":"-1h","stableFor":"1x","failureGrace":"2h","timeout":"1h"}`},
		{2, `{"kind":"Pod","name":"x"}`},
		{4, `{"name":"es"}`},
		{13, `{"resources":[{"apiVersion":"v1","kind":"Secret","namespace":"n","name":"../x"},"n/s",{"data":{"k":"v"}}],"probe":{"kind":"Secret"}}`},
	}
	for _, s := range seeds {
		f.Add(s.gate, s.doc, uint64(0))
		f.Add(s.gate, s.doc, ^uint64(0))
		f.Add(s.gate, s.doc, uint64(0x5555555555555555))
	}
	f.Fuzz(func(t *testing.T, gate uint8, doc string, mask uint64) {
		inputs, ok := fuzzInputs(doc, mask)
		if !ok {
			return
		}
		fuzzServerOnce.Do(func() { fuzzServer = newUnconfiguredServer(t) })
		typ := fuzzGates[int(gate)%len(fuzzGates)]
		m := property.NewMap(inputs)
		chk, err := fuzzServer.Check(p.CheckRequest{Urn: urn(typ), Inputs: m})
		var msgs []string
		if err != nil {
			msgs = append(msgs, err.Error())
		}
		for _, fl := range chk.Failures {
			msgs = append(msgs, engineText(m, fl))
		}
		for _, msg := range msgs {
			if strings.Contains(msg, fuzzMarker) {
				t.Fatalf("%s Check printed a secret input value: %s\ninputs: %s", typ, msg, doc)
			}
		}
	})
}
