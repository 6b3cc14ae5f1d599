//! The fake identity platform: checks a client-credentials token request (secret or signed
//! client assertion) the way the Microsoft identity platform documents it, and answers with
//! AADSTS-style errors.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Value, json};

use super::store::{iso, opaque_id};
use super::{ClientAuth, Ctx, Reply, State, Token, query};

/// Why a client assertion was refused (the text goes into `error_description`).
pub(crate) fn check_assertion(
    jwt: &str,
    expected_aud: &str,
    client_id: &str,
    public_key_der: Option<&[u8]>,
    expected_x5t_s256: Option<&str>,
    now: i64,
) -> Result<Value, String> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [h, c, s] = parts.as_slice() else {
        return Err("AADSTS50027: JWT token is invalid or malformed.".into());
    };
    let decode_json = |part: &str| -> Result<Value, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| "AADSTS50027: JWT segment is not base64url.".to_owned())?;
        serde_json::from_slice(&bytes).map_err(|_| "AADSTS50027: JWT segment is not JSON.".into())
    };
    let header = decode_json(h)?;
    let claims = decode_json(c)?;
    // The identity platform accepts PS256 (its current guidance) and RS256.
    let pss = match header["alg"].as_str() {
        Some("PS256") => true,
        Some("RS256") => false,
        _ => return Err("AADSTS5002738: Invalid JWT token. 'alg' must be PS256 or RS256.".into()),
    };
    if header["typ"] != "JWT" {
        return Err("AADSTS50027: Invalid JWT token. 'typ' must be JWT.".into());
    }
    if !header["x5t#S256"].is_string() && !header["x5t"].is_string() {
        return Err("AADSTS700027: Client assertion contains no certificate thumbprint.".into());
    }
    if let Some(x5t) = expected_x5t_s256
        && header["x5t#S256"] != x5t
    {
        return Err("AADSTS700027: The certificate with the given thumbprint is not registered for the application.".into());
    }
    if claims["aud"] != expected_aud {
        return Err(format!(
            "AADSTS700212: No matching federated identity record found; aud must be '{expected_aud}'."
        ));
    }
    if claims["iss"] != client_id || claims["sub"] != client_id {
        return Err(
            "AADSTS700023: Client assertion issuer and subject must be the client id.".into(),
        );
    }
    if claims["jti"].as_str().is_none_or(str::is_empty) {
        return Err("AADSTS700024: Client assertion has no jti.".into());
    }
    let (Some(nbf), Some(exp), Some(iat)) = (
        claims["nbf"].as_i64(),
        claims["exp"].as_i64(),
        claims["iat"].as_i64(),
    ) else {
        return Err("AADSTS700024: Client assertion lacks nbf, exp or iat.".into());
    };
    // Five minutes of clock skew, as the identity platform allows.
    if nbf > now + 300 || iat > now + 300 {
        return Err("AADSTS700024: Client assertion is not yet valid.".into());
    }
    if exp <= now - 300 || exp <= nbf {
        return Err("AADSTS700024: Client assertion is expired.".into());
    }
    let signature = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| "AADSTS50027: JWT signature is not base64url.".to_owned())?;
    if let Some(der) = public_key_der {
        use aws_lc_rs::signature::{
            RSA_PKCS1_2048_8192_SHA256, RSA_PSS_2048_8192_SHA256, UnparsedPublicKey,
        };
        let signed = format!("{h}.{c}");
        let algorithm = if pss {
            &RSA_PSS_2048_8192_SHA256
        } else {
            &RSA_PKCS1_2048_8192_SHA256
        };
        UnparsedPublicKey::new(algorithm, der)
            .verify(signed.as_bytes(), &signature)
            .map_err(|_| {
                "AADSTS700027: Client assertion failed signature validation.".to_owned()
            })?;
    }
    Ok(claims)
}

fn token_error(status: u16, error: &str, description: &str) -> Reply {
    Reply::json(
        status,
        &json!({
            "error": error,
            "error_description": format!("{description}\r\nTrace ID: 00000000-0000-4000-8000-000000000000\r\nTimestamp: {}", iso(Utc::now())),
            "error_codes": [description.get(6..12).and_then(|c| c.trim_end_matches(':').parse::<u64>().ok()).unwrap_or(0)],
            "timestamp": iso(Utc::now()),
        }),
    )
}

impl State {
    pub(super) fn token_valid(&self, auth: Option<&str>) -> bool {
        let Some(token) = auth.and_then(|a| a.strip_prefix("Bearer ")) else {
            return false;
        };
        self.tokens
            .get(token)
            .is_some_and(|t| t.generation >= self.generation && t.issued.elapsed() < t.lifetime)
    }

    pub(super) fn issue_token(&mut self) -> String {
        let n = self.next();
        let token = format!("eyJ0eXAiOiJKV1QiLCJmYWtlIjp0cnVlfQ.{}", opaque_id("tok", n));
        self.tokens.insert(
            token.clone(),
            Token {
                generation: self.generation,
                issued: Instant::now(),
                lifetime: Duration::from_secs(self.token_lifetime),
            },
        );
        token
    }

    pub(super) fn token(&mut self, ctx: &Ctx<'_>, segs: &[String]) -> Reply {
        self.token_requests += 1;
        let tenant = &segs[0];
        if !tenant.eq_ignore_ascii_case(&self.tenant) {
            return token_error(
                400,
                "invalid_client",
                &format!("AADSTS90002: Tenant '{tenant}' not found."),
            );
        }
        if !ctx
            .content_type
            .starts_with("application/x-www-form-urlencoded")
        {
            return token_error(
                400,
                "invalid_request",
                "AADSTS900144: The request body must be application/x-www-form-urlencoded.",
            );
        }
        let form = query::parse_form(&String::from_utf8_lossy(ctx.body));
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        if get("grant_type") != Some("client_credentials") {
            return token_error(
                400,
                "unsupported_grant_type",
                "AADSTS70003: The app requested an unsupported grant type.",
            );
        }
        if get("client_id") != Some(self.client_id.as_str()) {
            return token_error(
                400,
                "invalid_client",
                "AADSTS700016: Application not found in the directory.",
            );
        }
        if !get("scope").is_some_and(|s| s.ends_with("/.default")) {
            return token_error(
                400,
                "invalid_scope",
                "AADSTS1002012: The provided value for scope is not valid; client credentials need <resource>/.default.",
            );
        }
        let auth = match (get("client_secret"), get("client_assertion")) {
            (Some(secret), None) => {
                if self.client_secret.as_deref() != Some(secret) {
                    return token_error(
                        401,
                        "invalid_client",
                        "AADSTS7000215: Invalid client secret provided.",
                    );
                }
                ClientAuth::Secret
            }
            (None, Some(assertion)) => {
                if get("client_assertion_type")
                    != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                {
                    return token_error(
                        400,
                        "invalid_request",
                        "AADSTS50027: Unsupported client_assertion_type.",
                    );
                }
                let aud = format!("{}{}", ctx.origin, ctx.raw_path);
                match check_assertion(
                    assertion,
                    &aud,
                    &self.client_id,
                    self.public_key.as_deref(),
                    self.x5t_s256.as_deref(),
                    Utc::now().timestamp(),
                ) {
                    Ok(claims) => ClientAuth::Assertion(claims),
                    Err(why) => return token_error(401, "invalid_client", &why),
                }
            }
            _ => {
                return token_error(
                    401,
                    "invalid_client",
                    "AADSTS7000218: The request body must contain exactly one of client_secret or client_assertion.",
                );
            }
        };
        self.last_client_auth = Some(auth);
        let token = self.issue_token();
        Reply::json(
            200,
            &json!({
                "token_type": "Bearer",
                "expires_in": self.token_lifetime,
                "ext_expires_in": self.token_lifetime,
                "access_token": token,
            }),
        )
    }
}
