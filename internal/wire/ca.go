package wire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// PEMPair is a certificate and its private key, PEM-encoded.
type PEMPair struct{ Cert, Key []byte }

// Validity of the certificates NewCA and Issue make.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 2 * 365 * 24 * time.Hour
)

// NewCA makes a cluster CA: a self-signed ECDSA P-256 certificate that
// may only sign end certificates.
func NewCA(name string) (PEMPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEMPair{}, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(caValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
		MaxPathLenZero: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return PEMPair{}, fmt.Errorf("CA certificate: %w", err)
	}
	return encodePair(der, key)
}

// Issue signs a certificate for name with the CA. The certificate names
// name and every host (DNS names or IP addresses, added as subject
// alternative names): a dialer checks that the listener's certificate
// names the host it dialed. It serves both as a listener's and a dialer's
// certificate (clients listen for peers too).
func Issue(ca PEMPair, name string, hosts []string) (PEMPair, error) {
	caCert, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		return PEMPair{}, fmt.Errorf("load the CA: %w", err)
	}
	parent, err := x509.ParseCertificate(caCert.Certificate[0])
	if err != nil {
		return PEMPair{}, fmt.Errorf("parse the CA certificate: %w", err)
	}
	if !parent.IsCA {
		return PEMPair{}, errors.New("the CA certificate is not a CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEMPair{}, fmt.Errorf("key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range append([]string{name}, hosts...) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, caCert.PrivateKey)
	if err != nil {
		return PEMPair{}, fmt.Errorf("sign the certificate: %w", err)
	}
	return encodePair(der, key)
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (PEMPair, error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return PEMPair{}, fmt.Errorf("encode key: %w", err)
	}
	return PEMPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
