//! Test certificates for a local cluster (`sealog-server certs`): a CA, a certificate for
//! each server (its names and addresses as subject alternative names), and one for each
//! client with its role as the subject's organizational unit (see `auth`). A production
//! deployment brings certificates from its own CA; the layout of the files is the same.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

use crate::auth::Role;

/// The DNS name every server certificate carries, and the name clients check by default:
/// a local cluster's servers are reached by address, so they share one name to verify.
pub const SERVER_NAME: &str = "sealog-server";

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters.
    #[error("making the certificate of {name}: {reason}")]
    Make {
        /// Whose certificate.
        name: String,
        /// Why.
        reason: String,
    },
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A certificate authority held in memory while it signs.
pub struct CertAuthority {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

/// What a leaf certificate says.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The subject's common name.
    pub name: String,
    /// The role, as the organizational unit; `None` for a server's certificate.
    pub role: Option<Role>,
    /// DNS names and IP addresses it is valid for (servers).
    pub hosts: Vec<String>,
    /// The start of its validity.
    pub not_before: OffsetDateTime,
    /// The end of its validity.
    pub not_after: OffsetDateTime,
}

impl Leaf {
    /// A client certificate of `role`, valid from a day ago for a year.
    pub fn client(name: &str, role: Role) -> Leaf {
        let now = OffsetDateTime::now_utc();
        Leaf {
            name: name.into(),
            role: Some(role),
            hosts: Vec::new(),
            not_before: now - Duration::days(1),
            not_after: now + Duration::days(365),
        }
    }

    /// A server certificate for `name`, valid for `localhost`, [`SERVER_NAME`], its name
    /// and `addresses`, from a day ago for a year.
    pub fn server(name: &str, addresses: &[IpAddr]) -> Leaf {
        let mut hosts = vec!["localhost".into(), SERVER_NAME.into(), name.into()];
        hosts.extend(addresses.iter().map(IpAddr::to_string));
        Leaf {
            role: None,
            hosts,
            ..Leaf::client(name, Role::Client)
        }
    }
}

impl Leaf {
    /// A sequencer's certificate: a server's (clients reach it) that is also a client's of
    /// the sequencer role (it creates, seals and fences LogDrives).
    pub fn sequencer(name: &str, addresses: &[IpAddr]) -> Leaf {
        Leaf {
            role: Some(Role::Sequencer),
            ..Leaf::server(name, addresses)
        }
    }
}

fn make_error(name: &str) -> impl Fn(rcgen::Error) -> CertError + '_ {
    move |error| CertError::Make {
        name: name.into(),
        reason: error.to_string(),
    }
}

impl CertAuthority {
    /// A new self-signed CA named `name`, valid from a day ago for ten years.
    pub fn new(name: &str) -> Result<CertAuthority, CertError> {
        let error = make_error(name);
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(&error)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(3650);
        let key = KeyPair::generate().map_err(&error)?;
        let pem = params.self_signed(&key).map_err(&error)?.pem();
        Ok(CertAuthority { params, key, pem })
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Signs a certificate for `leaf` with a new key.
    pub fn issue(&self, leaf: &Leaf) -> Result<Issued, CertError> {
        let error = make_error(&leaf.name);
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(&error)?;
        params
            .distinguished_name
            .push(DnType::CommonName, &leaf.name);
        if let Some(role) = leaf.role {
            params
                .distinguished_name
                .push(DnType::OrganizationalUnitName, role.name());
        }
        for host in &leaf.hosts {
            let san = match host.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(host.as_str().try_into().map_err(&error)?),
            };
            params.subject_alt_names.push(san);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if !leaf.hosts.is_empty() {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = leaf.not_before;
        params.not_after = leaf.not_after;
        let key = KeyPair::generate().map_err(&error)?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(&error)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `pem` to `path`; private keys are readable by their owner only.
fn write(path: &Path, pem: &str, private: bool) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let error = |source| CertError::Write {
        path: path.display().to_string(),
        source,
    };
    let mode = if private { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(error)?;
    file.write_all(pem.as_bytes()).map_err(error)
}

/// Writes `issued` as `dir/NAME.pem` and `dir/NAME.key` (the names `TlsFiles::in_dir`
/// reads).
pub fn write_issued(dir: &Path, name: &str, issued: &Issued) -> Result<(), CertError> {
    write(&dir.join(format!("{name}.pem")), &issued.cert_pem, false)?;
    write(&dir.join(format!("{name}.key")), &issued.key_pem, true)
}

/// Makes a CA and certificates for `servers`, `sequencers` (name and addresses) and
/// `clients` (name and role) in `dir`: `ca.pem`, and `NAME.pem` with `NAME.key` for each.
/// Returns the files written.
pub fn write_cluster(
    dir: &Path,
    servers: &[(String, Vec<IpAddr>)],
    sequencers: &[(String, Vec<IpAddr>)],
    clients: &[(String, Role)],
) -> Result<Vec<PathBuf>, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    let ca = CertAuthority::new("sealog test CA")?;
    write(&dir.join("ca.pem"), ca.pem(), false)?;
    let mut written = vec![dir.join("ca.pem")];
    let leaves = servers
        .iter()
        .map(|(name, addresses)| Leaf::server(name, addresses))
        .chain(
            sequencers
                .iter()
                .map(|(name, addresses)| Leaf::sequencer(name, addresses)),
        )
        .chain(clients.iter().map(|(name, role)| Leaf::client(name, *role)));
    for leaf in leaves {
        write_issued(dir, &leaf.name, &ca.issue(&leaf)?)?;
        written.push(dir.join(format!("{}.pem", leaf.name)));
        written.push(dir.join(format!("{}.key", leaf.name)));
    }
    Ok(written)
}
