// Command ingress-nginx-standin serves ingress-nginx's admission webhook from a real pod, on a
// real node, for the chart's two images: ingress-nginx's controller needs nginx and cannot be
// built from Go modules here, so this binary stands in for the two parts of it that field
// report 002 meets, run by the chart exactly as it runs them (same arguments, same ports, same
// Secret, same hooks):
//
//   - the controller (`/nginx-ingress-controller --validating-webhook=:8443 ...`): /healthz on
//     10254 at once (the chart's probes), and the admission webhook on --validating-webhook
//     only 10 s after its first readiness probe passed: pod Ready is not webhook listening, the
//     gap the report measured (7-10 s). It admits every Ingress: the real one also renders
//     nginx's configuration and tests it, which needs nginx.
//   - kube-webhook-certgen (`create`, `patch`), the chart's hook Jobs: `create` writes a CA
//     and a serving certificate into the Secret (keys ca, cert, key) unless it exists; `patch`
//     puts the CA into the webhook configuration's caBundle and sets its failurePolicy.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// listenAfterReady is how long after the pod's first passed readiness probe the webhook
// starts listening: the upper end of field report 002's 7-10 s.
const listenAfterReady = 10 * time.Second

func main() {
	args := os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd := args[0]
		args = args[1:]
		var err error
		switch {
		case strings.HasSuffix(cmd, "nginx-ingress-controller"):
			err = controller(args)
		case cmd == "create":
			err = create(args)
		case cmd == "patch":
			err = patch(args)
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	log.Fatal("usage: /nginx-ingress-controller FLAGS | create FLAGS | patch FLAGS")
}

// flags parses the flags this stand-in uses and ignores the controller's others.
func flags(name string, args []string, define func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	define(fs)
	var known []string
	for _, a := range args {
		if n := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]; fs.Lookup(n) != nil {
			known = append(known, a)
		}
	}
	return fs.Parse(known)
}

func controller(args []string) error {
	var addr, certFile, keyFile string
	if err := flags("controller", args, func(fs *flag.FlagSet) {
		fs.StringVar(&addr, "validating-webhook", "", "")
		fs.StringVar(&certFile, "validating-webhook-certificate", "", "")
		fs.StringVar(&keyFile, "validating-webhook-key", "", "")
	}); err != nil {
		return err
	}
	var once sync.Once
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if addr != "" {
			once.Do(func() {
				log.Printf("first readiness probe passed; the webhook listens on %s in %s", addr, listenAfterReady)
				time.AfterFunc(listenAfterReady, func() { go serveWebhook(addr, certFile, keyFile) })
			})
		}
		_, _ = w.Write([]byte("ok"))
	})
	return http.ListenAndServe(":10254", health)
}

func serveWebhook(addr, certFile, keyFile string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/networking/v1/ingresses", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "expected an AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		log.Printf("admitting %s %s/%s", review.Request.Operation, review.Request.Namespace, review.Request.Name)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	})
	log.Printf("admission webhook listening on %s", addr)
	log.Fatal(http.ListenAndServeTLS(addr, certFile, keyFile, mux))
}

func client() (*kubernetes.Clientset, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func create(args []string) error {
	var hosts, ns, secret string
	if err := flags("create", args, func(fs *flag.FlagSet) {
		fs.StringVar(&hosts, "host", "", "")
		fs.StringVar(&ns, "namespace", "", "")
		fs.StringVar(&secret, "secret-name", "", "")
	}); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := c.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{}); err == nil {
		log.Printf("secret %s/%s exists", ns, secret)
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	ca, cert, key, err := certificates(strings.Split(hosts, ","))
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns},
		Data:       map[string][]byte{"ca": ca, "cert": cert, "key": key},
	}, metav1.CreateOptions{})
	if err == nil {
		log.Printf("created secret %s/%s", ns, secret)
	}
	return err
}

// certificates makes a CA and a serving certificate for hosts, signed by it (PEM).
func certificates(hosts []string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"nil1"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{Organization: []string{"nil2"}}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func patch(args []string) error {
	var webhook, ns, secret, policy string
	var mutating, validating bool
	if err := flags("patch", args, func(fs *flag.FlagSet) {
		fs.StringVar(&webhook, "webhook-name", "", "")
		fs.StringVar(&ns, "namespace", "", "")
		fs.StringVar(&secret, "secret-name", "", "")
		fs.StringVar(&policy, "patch-failure-policy", "", "")
		fs.BoolVar(&mutating, "patch-mutating", true, "")
		fs.BoolVar(&validating, "patch-validating", true, "")
	}); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	s, err := c.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ca := s.Data["ca"]
	if validating {
		cfg, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
			if policy != "" {
				p := admissionregistrationv1.FailurePolicyType(policy)
				cfg.Webhooks[i].FailurePolicy = &p
			}
		}
		if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		log.Printf("patched validating webhook configuration %s", webhook)
	}
	if mutating {
		cfg, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhook, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
		}
		if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		log.Printf("patched mutating webhook configuration %s", webhook)
	}
	return nil
}
