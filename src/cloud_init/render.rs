//! Rendering a template for a machine config. The real payload (with secrets) is hashed and
//! validated, then dropped; what is kept or shown is a second render with every secret replaced
//! by «redacted», so its structure matches while the recorded sha256 is of the real bytes.

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::filters::{shell_filter, yaml_filter};
use super::validate::{self, Finding, Severity};
use super::{lint, REDACTED};
use crate::audit::hex;
use crate::domain::machine::MachineSpec;
use crate::domain::{FieldError, FieldErrors};

/// Secrets given at render time, never stored.
#[derive(Default)]
pub struct Secrets {
    pub mesh_preauth_key: Option<SecretString>,
    pub tunnel_token: Option<SecretString>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(«redacted»)")
    }
}

impl Secrets {
    /// Parses optional submitted secrets: empty means absent; otherwise 1–512 printable
    /// characters without spaces (what tailscale and cloudflared issue).
    pub fn parse(
        mesh_preauth_key: Option<&str>,
        tunnel_token: Option<&str>,
    ) -> Result<Secrets, FieldErrors> {
        let mut errors = FieldErrors::default();
        let mut one = |field: &str, raw: Option<&str>| -> Option<SecretString> {
            let v = raw.map(str::trim).filter(|v| !v.is_empty())?;
            if v.len() > 512 || v.chars().any(|c| c.is_control() || c.is_whitespace()) {
                errors.0.push(FieldError::new(
                    field,
                    "must be at most 512 printable characters without spaces",
                ));
                return None;
            }
            Some(SecretString::from(v.to_owned()))
        };
        let secrets = Secrets {
            mesh_preauth_key: one("mesh_preauth_key", mesh_preauth_key),
            tunnel_token: one("tunnel_token", tunnel_token),
        };
        if errors.is_empty() {
            Ok(secrets)
        } else {
            Err(errors)
        }
    }

    fn exposed(&self) -> [(&'static str, Option<&str>); 2] {
        [
            (
                "mesh_preauth_key",
                self.mesh_preauth_key.as_ref().map(|s| s.expose_secret()),
            ),
            (
                "tunnel_token",
                self.tunnel_token.as_ref().map(|s| s.expose_secret()),
            ),
        ]
    }
}

/// What to render.
pub struct RenderRequest<'a> {
    pub template_body: &'a str,
    pub spec: &'a MachineSpec,
    /// The machine's hostname (the config name for previews).
    pub hostname: &'a str,
    pub secrets: &'a Secrets,
    /// cloud-init's JSON schema, when available.
    pub schema: Option<&'a jsonschema::Validator>,
}

/// A validated render. The real payload (with secrets) is held only as a secret, for sending to
/// the provider; it is never serialized, stored or shown.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rendered {
    /// The real bytes.
    #[serde(skip)]
    pub payload: SecretString,
    /// True when no finding is an error: the payload may be sent.
    pub ok: bool,
    /// The payload with secrets replaced by «redacted» (empty when rendering failed).
    pub redacted: String,
    /// Size of the real payload.
    pub size_bytes: usize,
    /// sha256 of the real payload.
    pub sha256: String,
    pub findings: Vec<Finding>,
}

fn context(req: &RenderRequest<'_>, secret_values: &[(&str, Option<&str>); 2]) -> tera::Context {
    let spec = req.spec;
    let tags = if spec.mesh_tags.is_empty() {
        format!("tag:{}", req.hostname)
    } else {
        spec.mesh_tags.join(",")
    };
    let mut ctx = tera::Context::new();
    ctx.insert("hostname", req.hostname);
    ctx.insert("machine", &json!(spec));
    ctx.insert("mesh_tags_csv", &tags);
    ctx.insert("mesh_login_server", "");
    for (name, value) in secret_values {
        ctx.insert(*name, value.unwrap_or(""));
    }
    ctx
}

fn engine(body: &str) -> Result<tera::Tera, tera::Error> {
    let mut tera = tera::Tera::default();
    tera.register_filter("yaml", yaml_filter);
    tera.register_filter("shell", shell_filter);
    // Not an .html name, so tera does no HTML escaping: the yaml filter is the escaping.
    tera.add_raw_template("payload", body)?;
    Ok(tera)
}

/// The innermost message of a tera error, with the template line when one can be found.
fn render_error(body: &str, err: &tera::Error) -> Finding {
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        msg = s.to_string();
        source = s.source();
    }
    let line = line_in_message(&msg).or_else(|| {
        // "Variable `x.y` not found …": point at the first line using it.
        let var = msg.split('`').nth(1)?;
        body.lines()
            .position(|l| l.contains(var) && (l.contains("{{") || l.contains("{%")))
            .map(|i| i + 1)
    });
    Finding {
        severity: Severity::Error,
        check: "render",
        message: format!("the template does not render: {}", msg.trim()),
        line,
        in_template: true,
    }
}

fn line_in_message(msg: &str) -> Option<usize> {
    // tera parse errors carry " --> LINE:COL".
    let after = msg.split("--> ").nth(1)?;
    after.split(':').next()?.trim().parse().ok()
}

/// Checks that a template parses, naming the line of a syntax error (for saving templates).
pub fn check_syntax(body: &str) -> Result<(), String> {
    engine(body).map(|_| ()).map_err(|e| {
        let f = render_error(body, &e);
        match f.line {
            Some(l) => format!("line {l}: {}", f.message),
            None => f.message,
        }
    })
}

fn failed(findings: Vec<Finding>) -> Rendered {
    Rendered {
        ok: false,
        payload: SecretString::from(String::new()),
        redacted: String::new(),
        size_bytes: 0,
        sha256: String::new(),
        findings,
    }
}

/// Renders and validates. Never fails: problems are findings.
pub fn render(req: &RenderRequest<'_>) -> Rendered {
    let mut findings = lint::raw_insertions(req.template_body);
    let tera = match engine(req.template_body) {
        Ok(t) => t,
        Err(e) => {
            findings.push(render_error(req.template_body, &e));
            return failed(findings);
        }
    };
    let payload = match tera.render("payload", &context(req, &req.secrets.exposed())) {
        Ok(p) => p,
        Err(e) => {
            findings.push(render_error(req.template_body, &e));
            return failed(findings);
        }
    };
    let placeholders = req.secrets.exposed().map(|(n, v)| (n, v.map(|_| REDACTED)));
    let mut redacted = tera
        .render("payload", &context(req, &placeholders))
        .unwrap_or_default();
    // Belt and braces: should a template transform a secret so that the placeholder render
    // differs, no raw secret may survive in the kept copy.
    for (_, value) in req.secrets.exposed() {
        if let Some(v) = value.filter(|v| v.len() >= 4) {
            redacted = redacted.replace(v, REDACTED);
        }
    }
    findings.extend(validate::validate(
        &payload,
        &req.spec.yubaba_sha256,
        req.schema,
    ));
    let ok = !findings.iter().any(|f| f.severity == Severity::Error);
    Rendered {
        ok,
        size_bytes: payload.len(),
        sha256: hex(&Sha256::digest(payload.as_bytes())),
        payload: SecretString::from(payload),
        redacted,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_template_renders_for_the_sample() {
        let spec = crate::cloud_init::sample::sample_spec();
        let secrets = Secrets::default();
        let r = render(&RenderRequest {
            template_body: crate::cloud_init::DEFAULT_TEMPLATE_BODY,
            spec: &spec,
            hostname: "spare-fsn1",
            secrets: &secrets,
            schema: None,
        });
        assert!(r.ok, "{:#?}", r.findings);
    }

    #[test]
    fn an_undefined_variable_is_an_error_naming_its_line() {
        let spec = crate::cloud_init::sample::sample_spec();
        let body =
            "#cloud-config\nhostname: {{ hostname | yaml }}\nfqdn: {{ machine.fqdn | yaml }}\n";
        let r = render(&RenderRequest {
            template_body: body,
            spec: &spec,
            hostname: "x",
            secrets: &Secrets::default(),
            schema: None,
        });
        assert!(!r.ok);
        let f = r
            .findings
            .iter()
            .find(|f| f.check == "render")
            .expect("a render finding");
        assert_eq!(f.line, Some(3));
        assert!(f.in_template);
        assert!(f.message.contains("machine.fqdn"), "{}", f.message);
        // A template that renders cleanly has no render finding.
        let ok = render(&RenderRequest {
            template_body: "#cloud-config\nhostname: {{ hostname | yaml }}\n",
            spec: &spec,
            hostname: "x",
            secrets: &Secrets::default(),
            schema: None,
        });
        assert!(ok.findings.iter().all(|f| f.check != "render"));
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let err = check_syntax("#cloud-config\nx: {{ a | yaml }\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
