//! A certificate authority made on the fly, for tests: a CA, server certificates for given
//! names and client certificates for given users, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A test CA whose files live in a directory.
pub struct TestPki {
    dir: PathBuf,
    stem: String,
    ca: Certificate,
    ca_key: KeyPair,
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

impl TestPki {
    /// A new CA named `stem`, its certificate written to `dir/STEM-ca.pem`.
    pub fn new(dir: &Path, stem: &str) -> TestPki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{stem} test CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("key");
        let ca = params.self_signed(&ca_key).expect("self-signed CA");
        let pki = TestPki {
            dir: dir.to_owned(),
            stem: stem.to_owned(),
            ca,
            ca_key,
        };
        write(&pki.ca_path(), &pki.ca.pem());
        pki
    }

    /// The CA certificate's PEM file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.pem", self.stem))
    }

    fn issue(
        &self,
        file: &str,
        cn: &str,
        names: &[&str],
        purpose: ExtendedKeyUsagePurpose,
    ) -> Issued {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("signed certificate");
        let issued = Issued {
            cert: self.dir.join(format!("{}-{file}.pem", self.stem)),
            key: self.dir.join(format!("{}-{file}.key", self.stem)),
        };
        write(&issued.cert, &cert.pem());
        write(&issued.key, &key.serialize_pem());
        issued
    }

    /// A server certificate valid for `names` (DNS names or IP addresses), as files named
    /// after `file`.
    pub fn server(&self, file: &str, names: &[&str]) -> Issued {
        let cn = names.first().copied().unwrap_or("server");
        self.issue(file, cn, names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate whose subject's common name is `user`.
    pub fn client(&self, file: &str, user: &str) -> Issued {
        self.issue(file, user, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }
}
