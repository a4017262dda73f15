package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the throw-away PKI of one control plane: a CA, the API server's
// serving certificate, an admin client certificate (group
// system:masters) and the service-account signing key.
type pki struct {
	dir                 string
	caCert, caKey       string
	serverCert          string
	serverKey           string
	adminCert, adminKey string
	saKey, saPub        string
	caPEM, adminCertPEM []byte
	adminKeyPEM         []byte
}

func newPKI(dir string) (*pki, error) {
	p := &pki{dir: dir}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "custody-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.caPEM = pemBlock("CERTIFICATE", caDER)
	if p.caCert, err = p.write("ca.crt", p.caPEM); err != nil {
		return nil, err
	}

	issue := func(serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(7*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kder), nil
	}
	sc, sk, err := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	})
	if err != nil {
		return nil, err
	}
	if p.serverCert, err = p.write("apiserver.crt", sc); err != nil {
		return nil, err
	}
	if p.serverKey, err = p.write("apiserver.key", sk); err != nil {
		return nil, err
	}
	ac, ak, err := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "custody-e2e-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	p.adminCertPEM, p.adminKeyPEM = ac, ak
	if p.adminCert, err = p.write("admin.crt", ac); err != nil {
		return nil, err
	}
	if p.adminKey, err = p.write("admin.key", ak); err != nil {
		return nil, err
	}

	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if p.saKey, err = p.write("sa.key", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa))); err != nil {
		return nil, err
	}
	if p.saPub, err = p.write("sa.pub", pemBlock("PUBLIC KEY", pub)); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) write(name string, data []byte) (string, error) {
	path := filepath.Join(p.dir, name)
	return path, os.WriteFile(path, data, 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
