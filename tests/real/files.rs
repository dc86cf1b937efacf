//! Images and files handed over with a question, through the real engines to the loopback
//! server: what reaches the model request.

use base64::Engine as _;
use serde_json::{Value, json};

use super::*;

const PNG: &[u8] = include_bytes!("../fixtures/pixel.png");

fn png_base64() -> String {
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// The images in the request's user messages (claude: image blocks; gemini: inline data parts),
/// as (media type, base64 data).
fn images_sent(body: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten().filter(|m| m["role"] == "user") {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "image" {
                let source = &block["source"];
                assert_eq!(source["type"], "base64", "{block}");
                found.push((source["media_type"].to_string(), source["data"].to_string()));
            }
        }
    }
    for c in body["contents"].as_array().into_iter().flatten().filter(|c| c["role"] == "user") {
        for part in c["parts"].as_array().into_iter().flatten() {
            let inline = &part["inlineData"];
            if inline.is_object() {
                found.push((inline["mimeType"].to_string(), inline["data"].to_string()));
            }
        }
    }
    found
}

fn expected_png() -> Vec<(String, String)> {
    vec![(json!("image/png").to_string(), json!(png_base64()).to_string())]
}

fn an_image_from_the_command_line(engine: &str) {
    let r = Real::new();
    std::fs::write(r.env.work.join("pic.png"), PNG).unwrap();
    let run = r.run(&["search", "-q", "-e", engine, "-f", "pic.png", "what is in the picture?"]);
    run.ok();
    assert_eq!(run.stdout, "ECHO: what is in the picture?", "{engine}");
    let first = r.api.turns().last().unwrap().body.clone();
    assert_eq!(images_sent(&first), expected_png(), "{engine}: {first}");
    let t = r.transcript();
    assert_eq!(t.records[1].meta.media_type.as_deref(), Some("image/png"), "{engine}");

    // The next turn's history names the image but does not send it again.
    r.run(&["search", "-q", "-r", "and its colour?"]).ok();
    let next = r.api.turns().last().unwrap().body.clone();
    assert_eq!(images_sent(&next), [], "{engine}: {next}");
    let framed = framed_message(&next);
    assert!(framed.contains("<attachment name=\"pic.png\">\n![pic.png](../files/"), "{framed}");
}

#[test]
fn claude_is_sent_an_image_from_the_command_line() {
    an_image_from_the_command_line("claude");
}

/// A prompt from the official ACP SDK client with an image block, a link to a file under the
/// session's folder, and a link to a file outside it.
fn images_and_links_over_acp(engine: &str) {
    let r = Real::new();
    r.env.write_config(&format!("engine = \"{engine}\"\n"));
    std::fs::write(r.env.work.join("notes.txt"), "NOTES: the meeting is at noon\n").unwrap();
    let outside = r.env.root.path().join("secret.txt");
    std::fs::write(&outside, "SECRET: not for the engine\n").unwrap();
    let uri = |p: &std::path::Path| format!("file://{}", p.display());
    let prompt = json!([
        {"type": "text", "text": "what do these say?"},
        {"type": "image", "mimeType": "image/png", "data": png_base64()},
        {"type": "resource_link", "name": "notes.txt", "uri": uri(&r.env.work.join("notes.txt"))},
        {"type": "resource_link", "name": "secret.txt", "uri": uri(&outside)},
    ]);
    let out = acp(
        &r,
        &[
            json!({"call": "session/new", "as": "s", "params": {"cwd": r.env.work, "mcpServers": []}}),
            json!({"call": "session/prompt", "as": "p",
                   "params": {"sessionId": "$s.sessionId", "prompt": prompt}}),
        ],
    );
    let capabilities = &out["results"]["initialize"]["agentCapabilities"]["promptCapabilities"];
    assert_eq!(capabilities["image"], true, "{capabilities}");
    assert_eq!(out["results"]["p"]["stopReason"], "end_turn", "{engine}: {}", out["results"]);
    let body = r.api.turns().last().unwrap().body.clone();
    assert_eq!(images_sent(&body), expected_png(), "{engine}: {body}");
    let framed = framed_message(&body);
    let notes = r.env.work.join("notes.txt").canonicalize().unwrap();
    assert!(
        framed.contains(&format!(
            "<attachment name=\"{}\">\nNOTES: the meeting is at noon\n",
            notes.display()
        )),
        "{engine}: the linked file's text reached the model: {framed}"
    );
    assert!(!framed.contains("SECRET"), "{engine}: a file outside was read: {framed}");
    assert!(
        framed.contains(&format!("[secret.txt]({})", uri(&outside))),
        "{engine}: a link outside stays a link: {framed}"
    );
    let t = r.transcript();
    let kinds: Vec<_> = t.records.iter().map(|r| (r.kind, r.meta.media_type.clone())).collect();
    use cca::transcript::Kind::{Assistant, Attachment, User};
    assert_eq!(
        kinds,
        [
            (User, None),
            (Attachment, Some("image/png".to_string())),
            (Attachment, None),
            (Assistant, None)
        ],
        "{engine}"
    );
}

#[test]
fn claude_over_acp_is_sent_images_and_linked_files() {
    images_and_links_over_acp("claude");
}

#[test]
fn gemini_is_sent_an_image_from_the_command_line() {
    an_image_from_the_command_line("gemini");
}

#[test]
fn gemini_over_acp_is_sent_images_and_linked_files() {
    images_and_links_over_acp("gemini");
}

/// A valid PNG of noise, `side` pixels square, stored without compression: about 3 × side² bytes.
fn noise_png(side: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    // Each row is a filter byte (0, none) and the row's pixels.
    let row = (side * 3 + 1) as usize;
    let mut raw = vec![0u8; row * side as usize];
    let mut seed = 0x2545_f491_u32;
    for (_, byte) in raw.iter_mut().enumerate().filter(|(i, _)| i % row != 0) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        *byte = seed as u8;
    }
    // zlib with stored blocks, then its Adler-32.
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = side.to_be_bytes().to_vec();
    header.extend_from_slice(&side.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"IDAT", &z);
    chunk(&mut png, b"IEND", &[]);
    png
}

/// claude's stdin limit is one of text: a large image (6 MB of base64 on its stdin line) is taken,
/// and claude makes it smaller itself before the request.
#[test]
fn claude_takes_a_large_image_over_its_text_limit() {
    let r = Real::new();
    let png = noise_png(1250);
    assert!(png.len() > 4_500_000, "{}", png.len());
    std::fs::write(r.env.work.join("big.png"), &png).unwrap();
    let run = r.run(&["search", "-q", "-e", "claude", "-f", "big.png", "what is in the picture?"]);
    run.ok();
    let sent = images_sent(&r.api.turns().last().unwrap().body);
    assert_eq!(sent.len(), 1, "{sent:?}");
}

/// gemini sends the file an `@word` in its prompt names (found by name or by a search of its
/// working folder): no `@` in a question, an attachment or the history may name one, while
/// cca's own `@PATH` line for an image still does.
#[test]
fn gemini_reads_no_file_an_at_sign_in_the_text_names() {
    let r = Real::new();
    let secret = "the contents of notes.txt, which stay here";
    std::fs::write(r.env.work.join("notes.txt"), secret).unwrap();
    std::fs::write(r.env.work.join("mail.txt"), "Reply to someone@notes.").unwrap();
    std::fs::write(r.env.work.join("pic.png"), PNG).unwrap();
    let question = "mail me at someone@notes please";
    let args = ["search", "-q", "-e", "gemini", "-f", "mail.txt", "-f", "pic.png", question];
    r.run(&args).ok();
    let first = r.api.turns().last().unwrap().body.clone();
    assert!(!first.to_string().contains(secret), "{first}");
    assert_eq!(images_sent(&first), expected_png(), "{first}");
    let framed = framed_message(&first);
    assert!(framed.contains("mail me at someone\\@notes please"), "{framed}");
    assert!(framed.contains("Reply to someone\\@notes."), "{framed}");

    // The next turn, without an image, carries both in its history.
    r.run(&["search", "-q", "-r", "and @notes?"]).ok();
    let next = r.api.turns().last().unwrap().body.clone();
    assert!(!next.to_string().contains(secret), "{next}");
    let sent = crate::sent_questions(&next);
    assert_eq!(sent, ["mail me at someone\\@notes please", "and \\@notes?"], "{next}");
    assert!(framed_message(&next).contains("Reply to someone\\@notes."), "{next}");
    // The transcript keeps the text as written.
    let t = r.transcript();
    assert_eq!(t.records[0].content, question);
}
