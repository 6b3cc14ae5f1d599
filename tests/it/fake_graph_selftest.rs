//! Self-tests of the fake Graph (tests/it/fake_graph): each documented behaviour the Graph
//! backend's tests rely on, driven with plain reqwest, so a regression in the fake shows here and
//! not as a puzzling failure of the backend's tests.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::fake_graph::query::percent_encode;
use crate::fake_graph::{
    CLIENT_ID, CLIENT_SECRET, ClientAuth, FakeGraph, Fault, FaultKind, Message, RetryAfter, Route,
    TENANT,
};

const BOX: &str = "mina.holt@example.com";
const OTHER: &str = "ops.desk@example.org";

struct G {
    fake: FakeGraph,
    http: reqwest::Client,
    token: String,
}

fn qs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl G {
    async fn new() -> Self {
        let fake = FakeGraph::start().await;
        fake.add_mailbox(BOX);
        let token = fake.issue_token();
        Self {
            fake,
            http: reqwest::Client::new(),
            token,
        }
    }
    fn url(&self, rest: &str, q: &[(&str, &str)]) -> String {
        let base = format!("{}/users/{BOX}/{rest}", self.fake.base_url());
        if q.is_empty() {
            base
        } else {
            format!("{base}?{}", qs(q))
        }
    }
    async fn send(&self, rb: reqwest::RequestBuilder, prefer: &str) -> (u16, Value) {
        let resp = rb
            .bearer_auth(&self.token)
            .header("Prefer", prefer)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap();
        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, v)
    }
    async fn get(&self, url: &str) -> (u16, Value) {
        self.send(self.http.get(url), r#"IdType="ImmutableId""#)
            .await
    }
    /// Follows `@odata.nextLink` to the end; returns every item and the page count.
    async fn all_pages(&self, first: &str) -> (Vec<Value>, usize) {
        let (mut items, mut pages, mut url) = (Vec::new(), 0, first.to_owned());
        loop {
            let (s, v) = self.get(&url).await;
            assert_eq!(s, 200, "{v}");
            pages += 1;
            items.extend(v["value"].as_array().unwrap().iter().cloned());
            match v["@odata.nextLink"].as_str() {
                Some(next) => url = next.to_owned(),
                None => return (items, pages),
            }
        }
    }
    async fn post_json(&self, url: &str, body: Value, prefer: &str) -> (u16, Value) {
        self.send(self.http.post(url).json(&body), prefer).await
    }
    async fn post_mime(&self, url: &str, mime: &str) -> (u16, Value) {
        let body = STANDARD.encode(mime.as_bytes());
        self.send(
            self.http
                .post(url)
                .header("Content-Type", "text/plain")
                .body(body),
            r#"IdType="ImmutableId""#,
        )
        .await
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

async fn token_request(fake: &FakeGraph, tenant: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/{tenant}/oauth2/v2.0/token", fake.uri()))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(qs(form))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

fn secret_form(secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("grant_type", "client_credentials".into()),
        ("client_id", CLIENT_ID.into()),
        ("scope", "https://graph.microsoft.com/.default".into()),
        ("client_secret", secret.into()),
    ]
}

#[tokio::test]
async fn token_by_secret_issues_bearer_and_refuses_wrong_credentials() {
    let fake = FakeGraph::start().await;
    let form = secret_form(CLIENT_SECRET);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (s, v) = token_request(&fake, TENANT, &pairs).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["token_type"], "Bearer");
    assert_eq!(v["expires_in"], 3599);
    assert!(v["access_token"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(fake.last_client_auth(), Some(ClientAuth::Secret));

    let wrong = secret_form("not-the-secret");
    let pairs: Vec<(&str, &str)> = wrong.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (s, v) = token_request(&fake, TENANT, &pairs).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("invalid_client")));
    assert!(
        v["error_description"]
            .as_str()
            .unwrap()
            .starts_with("AADSTS7000215")
    );

    let form = secret_form(CLIENT_SECRET);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (s, v) = token_request(&fake, "another-tenant", &pairs).await;
    assert_eq!((s, v["error"].as_str()), (400, Some("invalid_client")));
    let mut bad_client = pairs.clone();
    bad_client[1].1 = "00000000-0000-4000-8000-000000000000";
    let (s, _) = token_request(&fake, TENANT, &bad_client).await;
    assert_eq!(s, 400);
    assert_eq!(fake.token_requests(), 4);
    let env = fake.env();
    assert!(env.contains(&("MAILGATE_GRAPH_BASE_URL".to_owned(), fake.base_url())));
    assert!(env.contains(&(
        "MICROSOFT_GRAPH_CLIENT_SECRET".to_owned(),
        CLIENT_SECRET.to_owned()
    )));

    // The token works on Graph; expire_tokens() turns it into a 401.
    fake.add_mailbox(BOX);
    let token = {
        let (_, v) = token_request(&fake, TENANT, &pairs).await;
        v["access_token"].as_str().unwrap().to_owned()
    };
    let url = format!("{}/users/{BOX}/mailFolders/inbox", fake.base_url());
    let http = reqwest::Client::new();
    let ok = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    fake.expire_tokens();
    let gone = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(gone.status().as_u16(), 401);
    let v: Value = gone.json().await.unwrap();
    assert_eq!(code(&v), "InvalidAuthenticationToken");
    let none = http.get(&url).send().await.unwrap();
    assert_eq!(none.status().as_u16(), 401);
    // A zero lifetime: issued already expired.
    fake.set_token_lifetime(0);
    let t0 = fake.issue_token();
    let r = http.get(&url).bearer_auth(&t0).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

fn signed_assertion(key: &aws_lc_rs::rsa::KeyPair, aud: &str, iss: &str) -> String {
    let now = chrono::Utc::now().timestamp();
    let header = json!({"alg": "RS256", "typ": "JWT", "x5t#S256": "q2V5LXRodW1icHJpbnQ"});
    let claims = json!({"aud": aud, "iss": iss, "sub": iss, "jti": "5d3c5a61-0d4e-4b7a-9a0e-2f9f0b8e7c11",
        "nbf": now, "iat": now, "exp": now + 600});
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut sig = vec![0; key.public_modulus_len()];
    key.sign(
        &aws_lc_rs::signature::RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .unwrap();
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig))
}

#[tokio::test]
async fn token_by_client_assertion_checks_claims_and_signature() {
    use aws_lc_rs::signature::KeyPair as _;
    let fake = FakeGraph::start().await;
    let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    fake.set_assertion_key(key.public_key().as_ref());
    let request = |jwt: String| {
        let fake = &fake;
        async move {
            token_request(
                fake,
                TENANT,
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", CLIENT_ID),
                    ("scope", "https://graph.microsoft.com/.default"),
                    (
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    ),
                    ("client_assertion", &jwt),
                ],
            )
            .await
        }
    };
    let good = signed_assertion(&key, &fake.token_url(), CLIENT_ID);
    let (s, v) = request(good.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert!(
        matches!(fake.last_client_auth(), Some(ClientAuth::Assertion(c)) if c["iss"] == CLIENT_ID)
    );

    // A wrong audience, a wrong issuer, and a tampered signature are all refused.
    let (s, v) = request(signed_assertion(
        &key,
        "https://login.example.org/x",
        CLIENT_ID,
    ))
    .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (401, Some("invalid_client")),
        "{v}"
    );
    let (s, _) = request(signed_assertion(&key, &fake.token_url(), "someone-else")).await;
    assert_eq!(s, 401);
    let mut tampered = good.clone();
    tampered.pop();
    tampered.push(if good.ends_with('A') { 'B' } else { 'A' });
    let (s, v) = request(tampered).await;
    assert_eq!(s, 401);
    assert!(
        v["error_description"]
            .as_str()
            .unwrap()
            .contains("signature")
    );
    // A registered thumbprint must match the header's x5t#S256.
    fake.set_assertion_thumbprint("another-thumbprint");
    let (s, _) = request(good.clone()).await;
    assert_eq!(s, 401);
    fake.set_assertion_thumbprint("q2V5LXRodW1icHJpbnQ");
    let (s, _) = request(good.clone()).await;
    assert_eq!(s, 200);
    // Another key's signature fails too.
    let other = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let (s, _) = request(signed_assertion(&other, &fake.token_url(), CLIENT_ID)).await;
    assert_eq!(s, 401);
}

#[tokio::test]
async fn unknown_mailbox_is_error_invalid_user() {
    let g = G::new().await;
    let url = format!("{}/users/{OTHER}/mailFolders", g.fake.base_url());
    let (s, v) = g.get(&url).await;
    assert_eq!((s, code(&v)), (404, "ErrorInvalidUser"));
}

#[tokio::test]
async fn folders_page_nest_and_resolve_well_known_names() {
    let g = G::new().await;
    let projects = g.fake.add_folder(BOX, "Inbox/Projects");
    g.fake.add_folder(BOX, "Inbox/Projects/Alpha");
    g.fake.add_folder(BOX, "Receipts");
    g.fake.hide_folder(BOX, "Hidden Stuff");
    g.fake
        .add_message(BOX, "Inbox/Projects", Message::new("Kick-off").read(false));
    let (items, pages) = g
        .all_pages(&g.url(
            "mailFolders",
            &[("$top", "2"), ("$select", "displayName,childFolderCount")],
        ))
        .await;
    let names: Vec<&str> = items
        .iter()
        .map(|f| f["displayName"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        7,
        "six well-known + Receipts, hidden one left out: {names:?}"
    );
    assert_eq!(pages, 4);
    assert!(items[0].get("totalItemCount").is_none(), "$select honoured");
    assert!(items[0]["id"].is_string());

    let (s, inbox) = g.get(&g.url("mailFolders/InBox", &[])).await;
    assert_eq!(s, 200);
    assert_eq!(inbox["childFolderCount"], 1);
    let inbox_id = inbox["id"].as_str().unwrap();
    let (children, _) = g
        .all_pages(&g.url(
            &format!("mailFolders/{inbox_id}/childFolders"),
            &[("$top", "10")],
        ))
        .await;
    assert_eq!(children.len(), 1);
    assert_eq!(children[0]["id"], projects.as_str());
    assert_eq!(children[0]["parentFolderId"], inbox_id);
    assert_eq!(children[0]["unreadItemCount"], 1);
    assert_eq!(children[0]["totalItemCount"], 1);
    assert_eq!(children[0]["childFolderCount"], 1);
    assert_eq!(children[0]["isHidden"], false);
    let (s, v) = g.get(&g.url("mailFolders/nosuchfolder", &[])).await;
    assert_eq!((s, code(&v)), (404, "ErrorItemNotFound"));
}

#[tokio::test]
async fn listing_pages_by_absolute_next_links_with_the_same_parameters() {
    let g = G::new().await;
    let ids = g.fake.seed_synthetic(BOX, "inbox", 50);
    let first = g.url(
        "mailFolders/inbox/messages",
        &[("$select", "subject,receivedDateTime"), ("$top", "10")],
    );
    let (items, pages) = g.all_pages(&first).await;
    assert_eq!((items.len(), pages), (50, 5));
    // Newest first by default; every item once; only selected properties plus id and etag.
    assert_eq!(items[0]["id"], ids[49].as_str());
    assert_eq!(items[49]["id"], ids[0].as_str());
    let unique: BTreeSet<&str> = items.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(unique.len(), 50);
    let keys: BTreeSet<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["@odata.etag", "id", "subject", "receivedDateTime"])
    );
    let lists: Vec<_> = g
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.route == Route::List)
        .collect();
    assert_eq!(lists.len(), 5);
    for (i, r) in lists.iter().enumerate() {
        assert_eq!(r.param("$top"), Some("10"));
        assert_eq!(r.param("$select"), Some("subject,receivedDateTime"));
        assert_eq!(
            r.param("$skip").map(str::to_owned),
            (i > 0).then(|| (i * 10).to_string())
        );
        assert!(
            r.url.starts_with(&g.fake.base_url()),
            "nextLink is absolute"
        );
    }
    // Whole-mailbox listing, ascending order, $top bounds.
    let (s, v) = g
        .get(&g.url(
            "messages",
            &[("$top", "3"), ("$orderby", "receivedDateTime asc")],
        ))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["value"][0]["id"], ids[0].as_str());
    assert!(v["@odata.nextLink"].as_str().unwrap().contains("%24skip=3"));
    let (s, _) = g.get(&g.url("messages", &[("$top", "1000")])).await;
    assert_eq!(s, 200);
    let (s, v) = g.get(&g.url("messages", &[("$top", "1001")])).await;
    assert_eq!((s, code(&v)), (400, "ErrorInvalidArgument"));
    let (s, v) = g
        .get(&g.url("messages", &[("$select", "subject,noSuchProperty")]))
        .await;
    assert_eq!((s, code(&v)), (400, "RequestBroker--ParseUri"));
}

#[tokio::test]
async fn filter_subset_and_the_orderby_in_filter_rule() {
    let g = G::new().await;
    g.fake.seed_synthetic(BOX, "inbox", 30);
    // Synthetic n is unread when n % 3 == 0: 10 of 30.
    let (items, _) = g
        .all_pages(&g.url(
            "mailFolders/inbox/messages",
            &[("$filter", "isRead eq false"), ("$top", "4")],
        ))
        .await;
    assert_eq!(items.len(), 10);
    assert!(items.iter().all(|m| m["isRead"] == false));
    let (items, _) = g
        .all_pages(&g.url(
            "mailFolders/inbox/messages",
            &[
                (
                    "$filter",
                    "receivedDateTime ge 2026-01-06T00:00:00Z and hasAttachments eq true",
                ),
                ("$orderby", "receivedDateTime asc"),
                ("$top", "50"),
            ],
        ))
        .await;
    // Hour 15 is the first on 2026-01-06 (epoch 09:00 + 15 h); attachments every 5th: 15, 20, 25.
    let subjects: Vec<&str> = items
        .iter()
        .map(|m| m["subject"].as_str().unwrap())
        .collect();
    assert_eq!(
        subjects,
        [
            "Synthetic report 0015",
            "Synthetic report 0020",
            "Synthetic report 0025"
        ]
    );
    let (s, v) = g
        .get(&g.url(
            "messages",
            &[
                ("$filter", "isRead eq false"),
                ("$orderby", "receivedDateTime desc"),
            ],
        ))
        .await;
    assert_eq!((s, code(&v)), (400, "InefficientFilter"));
    let (s, v) = g
        .get(&g.url(
            "messages",
            &[
                (
                    "$filter",
                    "isRead eq false and receivedDateTime ge 2026-01-01T00:00:00Z",
                ),
                ("$orderby", "receivedDateTime desc"),
            ],
        ))
        .await;
    assert_eq!(
        (s, code(&v)),
        (400, "InefficientFilter"),
        "orderby property must come first"
    );
    let (s, v) = g
        .get(&g.url("messages", &[("$filter", "subject eq 'x'")]))
        .await;
    assert_eq!((s, code(&v)), (400, "ErrorInvalidUrlQueryFilter"));
}

#[tokio::test]
async fn search_matches_words_and_phrases_and_enforces_documented_limits() {
    let g = G::new().await;
    g.fake.add_message(
        BOX,
        "inbox",
        Message::new("Invoice INV-2026-0042 overdue")
            .from("Lena Brandt", "lena.brandt@example.org")
            .text("Please settle the amount due by Friday.")
            .sent("2026-02-01T10:00:00Z"),
    );
    g.fake.add_message(
        BOX,
        "inbox",
        Message::new("Team lunch")
            .html("<p>Lunch at the <b>harbour cafe</b> on Friday</p>")
            .file_attachment("menu-summer.txt", "text/plain", b"soup, bread")
            .sent("2026-02-03T10:00:00Z"),
    );
    g.fake.add_message(
        BOX,
        "Archive",
        Message::new("Old invoice").sent("2026-01-01T10:00:00Z"),
    );
    let search = |q: &str| g.url("messages", &[("$search", q), ("$top", "25")]);
    let ids = |v: &Value| -> Vec<String> {
        v["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["subject"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, v) = g.get(&search("\"invoice\"")).await;
    assert_eq!(ids(&v), ["Invoice INV-2026-0042 overdue", "Old invoice"]);
    let (_, v) = g.get(&search("\"friday\"")).await;
    assert_eq!(
        ids(&v),
        ["Team lunch", "Invoice INV-2026-0042 overdue"],
        "sentDateTime desc"
    );
    let (_, v) = g.get(&search("\"\\\"harbour cafe\\\"\"")).await;
    assert_eq!(ids(&v), ["Team lunch"], "phrase");
    let (_, v) = g.get(&search("\"\\\"cafe harbour\\\"\"")).await;
    assert_eq!(ids(&v), Vec::<String>::new(), "a phrase is not two words");
    let (_, v) = g.get(&search("\"menu-summer lunch\"")).await;
    assert_eq!(ids(&v), ["Team lunch"], "attachment names are searched");
    let (_, v) = g.get(&search("\"lena.brandt@example.org\"")).await;
    assert_eq!(ids(&v), ["Invoice INV-2026-0042 overdue"]);
    let (_, v) = g.get(&search("\"subject:lunch\"")).await;
    assert_eq!(ids(&v), ["Team lunch"]);
    let folder_search = g.url(
        "mailFolders/archive/messages",
        &[("$search", "\"invoice\"")],
    );
    let (_, v) = g.get(&folder_search).await;
    assert_eq!(ids(&v), ["Old invoice"]);

    let (s, v) = g
        .get(&g.url(
            "messages",
            &[("$search", "\"invoice\""), ("$filter", "isRead eq true")],
        ))
        .await;
    assert_eq!((s, code(&v)), (400, "ErrorInvalidUrlQuery"));
    let (s, _) = g
        .get(&g.url(
            "messages",
            &[
                ("$search", "\"invoice\""),
                ("$orderby", "receivedDateTime desc"),
            ],
        ))
        .await;
    assert_eq!(s, 400);
    let (s, _) = g.get(&g.url("messages", &[("$search", "invoice")])).await;
    assert_eq!(s, 400, "the query must be quoted");

    // The canary case: a Graph that ignores the query returns everything in scope.
    g.fake.ignore_search(BOX);
    let (_, v) = g.get(&search("\"zzzz-no-such-word\"")).await;
    assert_eq!(v["value"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn search_chain_stops_at_one_thousand_results() {
    let g = G::new().await;
    g.fake.seed_synthetic(BOX, "inbox", 1005);
    let first = g.url(
        "mailFolders/inbox/messages",
        &[
            ("$search", "\"synthetic\""),
            ("$top", "400"),
            ("$select", "subject"),
        ],
    );
    let (items, pages) = g.all_pages(&first).await;
    assert_eq!((items.len(), pages), (1000, 3));
    assert_eq!(
        items[0]["subject"], "Synthetic report 1004",
        "sentDateTime desc"
    );
    let searches: Vec<_> = g
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.route == Route::Search)
        .collect();
    assert!(searches[1].param("$skiptoken").is_some());
    assert_eq!(searches[1].param("$search"), Some("\"synthetic\""));
}

#[tokio::test]
async fn message_fields_body_as_text_headers_and_bad_ids() {
    let g = G::new().await;
    let id = g.fake.add_message(
        BOX,
        "inbox",
        Message::new("Re: Budget review")
            .from("Lena Brandt", "lena.brandt@example.org")
            .to("Mina Holt", BOX)
            .cc("Ravi Okafor", "ravi.okafor@example.org")
            .reply_to("Finance Desk", "finance.desk@example.org")
            .html("<div>Numbers <b>attached</b> &amp; checked.</div><script>x()</script>")
            .header("In-Reply-To", "<budget-1@example.org>")
            .header("References", "<budget-1@example.org>")
            .received("2026-03-02T08:30:00Z")
            .flagged(true),
    );
    let (s, m) = g.get(&g.url(&format!("messages/{id}"), &[])).await;
    assert_eq!(s, 200);
    assert_eq!(m["body"]["contentType"], "html");
    assert_eq!(m["receivedDateTime"], "2026-03-02T08:30:00Z");
    assert_eq!(
        m["from"]["emailAddress"]["address"],
        "lena.brandt@example.org"
    );
    assert_eq!(m["ccRecipients"][0]["emailAddress"]["name"], "Ravi Okafor");
    assert_eq!(
        m["replyTo"][0]["emailAddress"]["address"],
        "finance.desk@example.org"
    );
    assert_eq!(m["flag"]["flagStatus"], "flagged");
    assert_eq!(m["bodyPreview"], "Numbers attached & checked.");
    assert!(
        m.get("internetMessageHeaders").is_none(),
        "only when selected"
    );
    let (_, t) = g
        .send(
            g.http.get(g.url(
                &format!("messages/{id}"),
                &[("$select", "body,internetMessageHeaders")],
            )),
            r#"IdType="ImmutableId", outlook.body-content-type="text""#,
        )
        .await;
    assert_eq!(
        t["body"],
        json!({"contentType": "text", "content": "Numbers attached & checked."})
    );
    let headers = t["internetMessageHeaders"].as_array().unwrap();
    assert!(
        headers
            .iter()
            .any(|h| h["name"] == "In-Reply-To" && h["value"] == "<budget-1@example.org>")
    );
    assert!(t.get("subject").is_none());
    let (s, v) = g.get(&g.url("messages/not*an id", &[])).await;
    assert_eq!((s, code(&v)), (400, "ErrorInvalidIdMalformed"));
    let (s, v) = g
        .get(&g.url("messages/AAMkAGunknownunknownunknown=", &[]))
        .await;
    assert_eq!((s, code(&v)), (404, "ErrorItemNotFound"));
}

#[tokio::test]
async fn attachments_of_each_kind_and_their_raw_values() {
    let g = G::new().await;
    let attached = Message::new("Signed contract")
        .from("Lena Brandt", "lena.brandt@example.org")
        .text("The contract, signed.");
    let csv = b"month,amount\njan,120\nfeb,80\n";
    let id = g.fake.add_message(
        BOX,
        "inbox",
        Message::new("Q1 pack")
            .file_attachment("q1.csv", "text/csv", csv)
            .item_attachment(attached)
            .reference_attachment("Forecast.xlsx", "https://files.example.com/forecast.xlsx"),
    );
    let (s, v) = g
        .get(&g.url(&format!("messages/{id}/attachments"), &[]))
        .await;
    assert_eq!(s, 200);
    let list = v["value"].as_array().unwrap();
    let types: Vec<&str> = list
        .iter()
        .map(|a| a["@odata.type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "#microsoft.graph.fileAttachment",
            "#microsoft.graph.itemAttachment",
            "#microsoft.graph.referenceAttachment"
        ]
    );
    assert_eq!(list[0]["contentBytes"], STANDARD.encode(csv));
    assert_eq!(list[0]["size"], csv.len());
    assert!(list[1].get("contentBytes").is_none());
    assert!(
        list.iter()
            .all(|a| a["lastModifiedDateTime"].is_string() && a["isInline"] == false)
    );
    let (_, sel) = g
        .get(&g.url(
            &format!("messages/{id}/attachments"),
            &[("$select", "name,size,contentType")],
        ))
        .await;
    assert!(
        sel["value"][0].get("contentBytes").is_none(),
        "$select excludes contentBytes"
    );
    assert_eq!(
        sel["value"][0]["@odata.type"],
        "#microsoft.graph.fileAttachment"
    );

    let (_, expanded) = g
        .get(&g.url(
            &format!("messages/{id}/attachments"),
            &[("$expand", "microsoft.graph.itemattachment/item")],
        ))
        .await;
    assert_eq!(expanded["value"][1]["item"]["subject"], "Signed contract");
    assert!(expanded["value"][0].get("item").is_none());
    let aid = |i: usize| list[i]["id"].as_str().unwrap().to_owned();
    let (s, one) = g
        .get(&g.url(&format!("messages/{id}/attachments/{}", aid(0)), &[]))
        .await;
    assert_eq!((s, one["name"].as_str()), (200, Some("q1.csv")));
    let raw = |i: usize| {
        g.http
            .get(g.url(&format!("messages/{id}/attachments/{}/$value", aid(i)), &[]))
            .bearer_auth(&g.token)
            .send()
    };
    let r = raw(0).await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/csv");
    assert_eq!(r.bytes().await.unwrap().as_ref(), csv);
    let r = raw(1).await.unwrap();
    assert_eq!(r.headers()["content-type"], "message/rfc822");
    let mime = r.bytes().await.unwrap();
    let parsed = mail_parser::MessageParser::default()
        .parse(mime.as_ref())
        .unwrap();
    assert_eq!(parsed.subject(), Some("Signed contract"));
    assert_eq!(raw(2).await.unwrap().status().as_u16(), 400);
}

#[tokio::test]
async fn move_keeps_immutable_ids_copy_makes_new_ones_patch_marks_read() {
    let g = G::new().await;
    let id = g.fake.add_message(BOX, "inbox", Message::new("Move me"));
    let archive = g.fake.folder_id(BOX, "archive").unwrap();
    let (s, m) = g
        .post_json(
            &g.url(&format!("messages/{id}/move"), &[]),
            json!({"destinationId": "archive"}),
            r#"IdType="ImmutableId""#,
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(m["id"], id.as_str(), "immutable id survives the move");
    assert_eq!(m["parentFolderId"], archive.as_str());
    assert!(g.fake.messages_in(BOX, "inbox").is_empty());
    assert_eq!(g.fake.messages_in(BOX, "archive").len(), 1);

    // Without ImmutableId, Graph hands out a new id on move; the old one is gone.
    let (s, m) = g
        .post_json(
            &g.url(&format!("messages/{id}/move"), &[]),
            json!({"destinationId": "inbox"}),
            "",
        )
        .await;
    assert_eq!(s, 201);
    let new_id = m["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id);
    let (s, _) = g.get(&g.url(&format!("messages/{id}"), &[])).await;
    assert_eq!(s, 404);

    let (s, c) = g
        .post_json(
            &g.url(&format!("messages/{new_id}/copy"), &[]),
            json!({"destinationId": archive}),
            r#"IdType="ImmutableId""#,
        )
        .await;
    assert_eq!(s, 201);
    assert_ne!(c["id"], new_id.as_str());
    assert_eq!(g.fake.messages_in(BOX, "inbox").len(), 1);
    assert_eq!(g.fake.messages_in(BOX, "archive").len(), 1);

    let (s, v) = g
        .post_json(
            &g.url(&format!("messages/{new_id}/move"), &[]),
            json!({"destinationId": "nosuchfolder"}),
            "",
        )
        .await;
    assert_eq!((s, code(&v)), (404, "ErrorItemNotFound"));

    let (s, p) = g
        .send(
            g.http
                .patch(g.url(&format!("messages/{new_id}"), &[]))
                .json(&json!({"isRead": true})),
            "",
        )
        .await;
    assert_eq!((s, &p["isRead"]), (200, &json!(true)));
    assert!(g.fake.message(BOX, &new_id).unwrap().is_read);
    let (s, _) = g
        .send(
            g.http
                .patch(g.url(&format!("messages/{new_id}"), &[]))
                .json(&json!({"subject": "x"})),
            "",
        )
        .await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn mime_draft_lands_in_drafts_and_send_mail_files_a_sent_copy() {
    let g = G::new().await;
    let draft = "From: Mina Holt <mina.holt@example.com>\r\nTo: Lena Brandt <lena.brandt@example.org>\r\n\
        Subject: Re: Budget review\r\nIn-Reply-To: <budget-1@example.org>\r\nReferences: <budget-1@example.org>\r\n\
        MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nLooks good to me.\r\n";
    let (s, m) = g.post_mime(&g.url("messages", &[]), draft).await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(m["isDraft"], true);
    assert_eq!(m["subject"], "Re: Budget review");
    assert_eq!(
        m["toRecipients"][0]["emailAddress"]["address"],
        "lena.brandt@example.org"
    );
    assert_eq!(
        m["parentFolderId"],
        g.fake.folder_id(BOX, "drafts").unwrap().as_str()
    );
    let stored = g.fake.messages_in(BOX, "drafts");
    assert_eq!(stored.len(), 1);
    assert!(
        stored[0]
            .headers
            .iter()
            .any(|(n, v)| n == "In-Reply-To" && v == "<budget-1@example.org>")
    );

    let mail = "From: Mina Holt <mina.holt@example.com>\r\nTo: Lena Brandt <lena.brandt@example.org>\r\n\
        Cc: Ravi Okafor <ravi.okafor@example.org>\r\nBcc: Audit <audit@example.org>\r\nSubject: Figures\r\n\
        MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nAttached below.\r\n";
    let (s, _) = g.post_mime(&g.url("sendMail", &[]), mail).await;
    assert_eq!(s, 202);
    let sent = g.fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].to, ["lena.brandt@example.org"]);
    assert_eq!(sent[0].cc, ["ravi.okafor@example.org"]);
    assert_eq!(sent[0].bcc, ["audit@example.org"]);
    let copies = g.fake.messages_in(BOX, "sentitems");
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].subject, "Figures");
    assert!(!copies[0].is_draft);

    let (s, v) = g
        .send(
            g.http
                .post(g.url("sendMail", &[]))
                .header("Content-Type", "text/plain")
                .body("%%%not base64"),
            "",
        )
        .await;
    assert_eq!((s, code(&v)), (400, "ErrorMimeContentInvalidBase64String"));
    let norcpt = "From: Mina Holt <mina.holt@example.com>\r\nSubject: Nobody\r\n\r\nhi\r\n";
    let (s, v) = g.post_mime(&g.url("sendMail", &[]), norcpt).await;
    assert_eq!((s, code(&v)), (400, "ErrorInvalidRecipients"));
}

#[tokio::test]
async fn throttling_and_server_faults_per_route() {
    let g = G::new().await;
    g.fake.seed_synthetic(BOX, "inbox", 50);
    let date = chrono::Utc::now() + chrono::Duration::seconds(30);
    g.fake.inject(Fault::new(
        Route::Folders,
        FaultKind::Throttle(RetryAfter::Seconds(7)),
    ));
    g.fake.inject(Fault::new(
        Route::Folders,
        FaultKind::Throttle(RetryAfter::HttpDate(date)),
    ));
    g.fake
        .inject(Fault::new(Route::Folders, FaultKind::Unavailable(None)));
    g.fake.inject(Fault::new(
        Route::Folders,
        FaultKind::Unavailable(Some(RetryAfter::Seconds(2))),
    ));
    let folders = g.url("mailFolders", &[]);
    let get = || g.http.get(&folders).bearer_auth(&g.token).send();
    let r = get().await.unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["retry-after"].to_str().unwrap()
        ),
        (429, "7")
    );
    let r = get().await.unwrap();
    assert_eq!(r.status().as_u16(), 429);
    let when = r.headers()["retry-after"].to_str().unwrap().to_owned();
    assert_eq!(when, date.format("%a, %d %b %Y %H:%M:%S GMT").to_string());
    let r = get().await.unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.headers().get("retry-after").is_none());
    let r = get().await.unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["retry-after"].to_str().unwrap()
        ),
        (503, "2")
    );
    assert_eq!(
        get().await.unwrap().status().as_u16(),
        200,
        "faults are used up"
    );

    // A 500 on page 3 of 5: the third request of the list route.
    g.fake.inject(
        Fault::new(Route::List, FaultKind::ServerError).nth(g.fake.route_count(Route::List) + 3),
    );
    let mut url = g.url("mailFolders/inbox/messages", &[("$top", "10")]);
    let mut statuses = Vec::new();
    loop {
        let (s, v) = g.get(&url).await;
        statuses.push(s);
        match (s, v["@odata.nextLink"].as_str()) {
            (200, Some(next)) => url = next.to_owned(),
            _ => break,
        }
    }
    assert_eq!(statuses, [200, 200, 500]);
    let (s, v) = g.get(&url).await;
    assert_eq!(
        (s, v["value"].as_array().map(Vec::len)),
        (200, Some(10)),
        "the retry of page 3 works"
    );
}

#[tokio::test]
async fn delays_malformed_json_missing_fields_and_latency() {
    let g = G::new().await;
    let id = g.fake.add_message(BOX, "inbox", Message::new("Only one"));
    let list = g.url("mailFolders/inbox/messages", &[]);
    g.fake.inject(Fault::new(
        Route::List,
        FaultKind::Delay(Duration::from_secs(5)),
    ));
    let started = Instant::now();
    let r = g
        .http
        .get(&list)
        .bearer_auth(&g.token)
        .timeout(Duration::from_millis(200))
        .send()
        .await;
    assert!(r.is_err_and(|e| e.is_timeout()));
    assert!(started.elapsed() < Duration::from_secs(2));

    g.fake
        .inject(Fault::new(Route::List, FaultKind::MalformedJson));
    let r = g
        .http
        .get(&list)
        .bearer_auth(&g.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(serde_json::from_slice::<Value>(&r.bytes().await.unwrap()).is_err());

    g.fake.inject(Fault::new(
        Route::List,
        FaultKind::MissingField("id".into()),
    ));
    let (_, v) = g.get(&list).await;
    assert!(v["value"][0].get("id").is_none());
    assert_eq!(v["value"][0]["subject"], "Only one");
    g.fake.inject(Fault::new(
        Route::Message,
        FaultKind::MissingField("receivedDateTime".into()),
    ));
    let (_, m) = g.get(&g.url(&format!("messages/{id}"), &[])).await;
    assert!(m.get("receivedDateTime").is_none() && m["id"] == id.as_str());

    g.fake.latency(Duration::from_millis(50));
    let started = Instant::now();
    let (s, _) = g.get(&list).await;
    assert_eq!(s, 200);
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[tokio::test]
async fn recording_supports_secret_allowlist_and_route_assertions() {
    let g = G::new().await;
    g.fake.add_mailbox(OTHER);
    let form = secret_form(CLIENT_SECRET);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    token_request(&g.fake, TENANT, &pairs).await;
    g.get(&g.url("mailFolders", &[])).await;
    g.get(&g.url("messages", &[("$search", "\"x\"")])).await;
    g.fake.assert_no_secret_in_urls(&[CLIENT_SECRET]);
    g.fake.assert_users_within(&[BOX]);
    assert_eq!(
        g.fake.routes_seen(),
        BTreeSet::from([
            ("POST".to_owned(), Route::Token),
            ("GET".to_owned(), Route::Folders),
            ("GET".to_owned(), Route::Search)
        ])
    );
    let reqs = g.fake.requests();
    assert!(reqs[1].header("prefer").unwrap().contains("ImmutableId"));
    assert_eq!(reqs[1].user.as_deref(), Some(BOX));

    // The assertions do fire: a secret in a query string, a mailbox outside the list.
    let leak = format!(
        "{}?client_secret={}",
        g.url("mailFolders", &[]),
        percent_encode(CLIENT_SECRET)
    );
    g.get(&leak).await;
    g.get(&format!("{}/users/{OTHER}/mailFolders", g.fake.base_url()))
        .await;
    let fake = &g.fake;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fake.assert_no_secret_in_urls(&[CLIENT_SECRET]);
    }));
    assert!(caught.is_err());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fake.assert_users_within(&[BOX]);
    }));
    assert!(caught.is_err());
}

#[tokio::test]
async fn seeds_the_demo_corpus_from_eml_files() {
    let g = G::new().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo/messages");
    let n = g.fake.seed_from_eml_dir(
        &dir,
        &[
            ("personal", "ana.lima@example.com"),
            ("finance", "finance@example.com"),
            ("support", "support@example.com"),
            ("archive", "archive@example.com"),
        ],
    );
    assert_eq!(n, 209);
    assert_eq!(
        g.fake.messages_in("ana.lima@example.com", "inbox").len(),
        42
    );
    assert_eq!(
        g.fake
            .messages_in("ana.lima@example.com", "sentitems")
            .len(),
        14
    );
    assert_eq!(
        g.fake
            .messages_in("ana.lima@example.com", "Projects/Alpha")
            .len(),
        8
    );
    let inbox = g.fake.messages_in("finance@example.com", "inbox");
    assert_eq!(inbox.len(), 38);
    assert!(
        inbox
            .iter()
            .any(|m| m.attachments.iter().any(|a| a.name.ends_with(".pdf")))
    );
    assert!(inbox.iter().any(|m| m.is_read) && inbox.iter().any(|m| !m.is_read));
    assert!(
        g.fake
            .messages_in("finance@example.com", "drafts")
            .iter()
            .all(|m| m.is_draft)
    );
}

#[tokio::test]
async fn json_batch_runs_each_step_with_its_own_faults() {
    let g = G::new().await;
    let id = g.fake.add_message(
        BOX,
        "inbox",
        Message::new("Batched").file_attachment("a.txt", "text/plain", b"hello"),
    );
    let other = g
        .fake
        .add_message(BOX, "inbox", Message::new("Throttled one"));
    g.fake
        .inject(Fault::new(Route::Message, FaultKind::Throttle(RetryAfter::Seconds(3))).nth(2));
    let batch = format!("{}/$batch", g.fake.base_url());
    let body = json!({"requests": [
        {"id": "1", "method": "GET", "url": format!("/users/{BOX}/messages/{id}?$select=subject")},
        {"id": "2", "method": "GET", "url": format!("/users/{BOX}/messages/{other}")},
        {"id": "3", "method": "GET", "url": format!("/users/{BOX}/messages/{id}/attachments/x/$value")},
        {"id": "4", "method": "PATCH", "url": format!("/users/{BOX}/messages/{id}"),
         "headers": {"Content-Type": "application/json"}, "body": {"isRead": true}},
    ]});
    let (s, v) = g.post_json(&batch, body, r#"IdType="ImmutableId""#).await;
    assert_eq!(s, 200, "{v}");
    let r = v["responses"].as_array().unwrap();
    assert_eq!(r[0]["status"], 200);
    assert_eq!(r[0]["body"]["subject"], "Batched");
    assert_eq!(r[1]["status"], 429);
    assert_eq!(r[1]["headers"]["Retry-After"], "3");
    assert_eq!(r[2]["status"], 404);
    assert_eq!(r[3]["status"], 200);
    assert!(g.fake.message(BOX, &id).unwrap().is_read);
    let routes = g.fake.routes_seen();
    assert!(routes.contains(&("POST".to_owned(), Route::Batch)));
    assert!(routes.contains(&("PATCH".to_owned(), Route::Patch)));

    let too_many: Vec<Value> = (0..21)
        .map(|i| json!({"id": i.to_string(), "method": "GET", "url": format!("/users/{BOX}/mailFolders")}))
        .collect();
    let (s, _) = g.post_json(&batch, json!({"requests": too_many}), "").await;
    assert_eq!(s, 400);
    // Steps inherit the batch's token: an expired one fails the batch itself.
    g.fake.expire_tokens();
    let (s, v) = g.post_json(&batch, json!({"requests": []}), "").await;
    assert_eq!((s, code(&v)), (401, "InvalidAuthenticationToken"));
}

#[tokio::test]
async fn permissions_and_rbac_scope_are_enforced_and_reported() {
    let g = G::new().await;
    g.fake.add_mailbox(OTHER);
    let id = g.fake.add_message(BOX, "inbox", Message::new("Read only"));
    g.get(&g.url("mailFolders", &[])).await;
    assert_eq!(g.fake.permissions_used(), BTreeSet::from(["Mail.Read"]));

    g.fake.grant(&["Mail.Read"]);
    let (s, _) = g.get(&g.url(&format!("messages/{id}"), &[])).await;
    assert_eq!(s, 200);
    let (s, v) = g
        .send(
            g.http
                .patch(g.url(&format!("messages/{id}"), &[]))
                .json(&json!({"isRead": true})),
            "",
        )
        .await;
    assert_eq!((s, code(&v)), (403, "ErrorAccessDenied"));
    assert!(
        !g.fake.message(BOX, &id).unwrap().is_read,
        "a denied write changes nothing"
    );
    let mail = "From: Mina Holt <mina.holt@example.com>\r\nTo: Lena Brandt <lena.brandt@example.org>\r\nSubject: x\r\n\r\nx\r\n";
    let (s, _) = g.post_mime(&g.url("sendMail", &[]), mail).await;
    assert_eq!(s, 403);
    assert!(g.fake.sent().is_empty());
    assert_eq!(
        g.fake.permissions_used(),
        BTreeSet::from(["Mail.Read", "Mail.ReadWrite", "Mail.Send"])
    );

    // Mail.ReadWrite implies Mail.Read; the RBAC scope keeps the app out of other mailboxes.
    g.fake.grant(&["Mail.ReadWrite"]);
    g.fake.scope_app_to(&[BOX]);
    let (s, _) = g.get(&g.url("mailFolders", &[])).await;
    assert_eq!(s, 200);
    let (s, v) = g
        .get(&format!("{}/users/{OTHER}/mailFolders", g.fake.base_url()))
        .await;
    assert_eq!((s, code(&v)), (403, "ErrorAccessDenied"));
}
