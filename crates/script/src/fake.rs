//! Fake data drawn for templates' fake-data functions (`{{ $internetEmail() }}`,
//! `{{ $personFirstName() }}`…), values of the shape Faker gives, from small word lists of our
//! own: a load test needs a value that varies, rarely a realistic one. Written by hand: no Rust
//! crate speaks Faker's names, and a realistic generator's locale data would dwarf the binary
//! for a few fields.

use std::fmt::Write;

use loadlab_run::fake::Fake;

const FIRST: [&str; 24] = [
    "Ana", "Ben", "Carla", "Diego", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kim",
    "Lucia", "Mateo", "Nora", "Omar", "Paula", "Quinn", "Rosa", "Samuel", "Tara", "Umar", "Vera",
    "Wes", "Yara",
];
const LAST: [&str; 20] = [
    "Alvarez", "Brown", "Castro", "Diaz", "Evans", "Fischer", "Garcia", "Hughes", "Ito", "Jensen",
    "Khan", "Lopez", "Moreno", "Nakamura", "Okafor", "Petrov", "Quiroga", "Rossi", "Silva",
    "Torres",
];
const CITIES: [&str; 16] = [
    "Montevideo",
    "Lisbon",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Lyon",
    "Valparaiso",
    "Krakow",
    "Austin",
    "Porto Alegre",
    "Seville",
    "Auckland",
    "Dublin",
    "Rosario",
    "Busan",
    "Accra",
];
const COUNTRIES: [&str; 16] = [
    "Uruguay",
    "Portugal",
    "Japan",
    "Canada",
    "Kenya",
    "France",
    "Chile",
    "Poland",
    "Mexico",
    "Brazil",
    "Spain",
    "New Zealand",
    "Ireland",
    "Argentina",
    "South Korea",
    "Ghana",
];
const STREETS: [&str; 6] = ["Street", "Avenue", "Road", "Lane", "Boulevard", "Way"];
const COMPANY: [&str; 5] = ["Inc", "LLC", "Group", "and Sons", "Labs"];
const WORDS: [&str; 32] = [
    "alpha", "amber", "brisk", "cedar", "delta", "ember", "fable", "glade", "harbor", "ivory",
    "jolly", "kernel", "lumen", "maple", "nectar", "orbit", "pixel", "quartz", "ripple", "sable",
    "tidal", "umber", "velvet", "willow", "yonder", "zephyr", "copper", "meadow", "signal",
    "timber", "vector", "canyon",
];
const LEVELS: [&str; 5] = ["Senior", "Junior", "Lead", "Principal", "Associate"];
const AREAS: [&str; 6] = ["Data", "Web", "Product", "Security", "Quality", "Platform"];
const ROLES: [&str; 6] = [
    "Engineer",
    "Designer",
    "Analyst",
    "Manager",
    "Architect",
    "Consultant",
];
const COLORS: [&str; 12] = [
    "red", "blue", "green", "yellow", "purple", "orange", "teal", "indigo", "violet", "silver",
    "gold", "salmon",
];
const ADJECTIVES: [&str; 6] = [
    "Sleek",
    "Rustic",
    "Handmade",
    "Ergonomic",
    "Small",
    "Refined",
];
const MATERIALS: [&str; 6] = ["Wooden", "Steel", "Cotton", "Granite", "Plastic", "Bamboo"];
const PRODUCTS: [&str; 6] = ["Chair", "Table", "Lamp", "Shirt", "Keyboard", "Bottle"];

/// Appends a value of `fake` to `out`.
pub fn render(fake: Fake, rng: &mut fastrand::Rng, out: &mut String) {
    let pick = |rng: &mut fastrand::Rng, list: &[&'static str]| list[rng.usize(..list.len())];
    match fake {
        Fake::Email => {
            let (f, l) = (pick(rng, &FIRST), pick(rng, &LAST));
            let n = rng.u32(1..1000);
            let domain = pick(rng, &["example.com", "example.org", "example.net"]);
            let _ = write!(out, "{}.{}{n}@{domain}", f.to_lowercase(), l.to_lowercase());
        }
        Fake::FullName => {
            let _ = write!(out, "{} {}", pick(rng, &FIRST), pick(rng, &LAST));
        }
        Fake::FirstName => out.push_str(pick(rng, &FIRST)),
        Fake::LastName => out.push_str(pick(rng, &LAST)),
        Fake::UserName => {
            let (f, l) = (pick(rng, &FIRST), pick(rng, &LAST));
            let sep = pick(rng, &[".", "_", ""]);
            let _ = write!(out, "{f}{sep}{l}{}", rng.u32(1..100));
        }
        Fake::Password => out.extend((0..15).map(|_| rng.alphanumeric())),
        Fake::Uuid => {
            let b = rng.u128(..).to_be_bytes();
            let hex = |s: &[u8]| s.iter().map(|x| format!("{x:02x}")).collect::<String>();
            let variant = 0x80 | (b[8] & 0x3f);
            let _ = write!(
                out,
                "{}-{}-4{:01x}{:02x}-{variant:02x}{:02x}-{}",
                hex(&b[0..4]),
                hex(&b[4..6]),
                b[6] & 0x0f,
                b[7],
                b[9],
                hex(&b[10..16])
            );
        }
        Fake::Phone => {
            let _ = write!(out, "555-{:03}-{:04}", rng.u32(..1000), rng.u32(..10_000));
        }
        Fake::City => out.push_str(pick(rng, &CITIES)),
        Fake::Country => out.push_str(pick(rng, &COUNTRIES)),
        Fake::StreetAddress => {
            let _ = write!(
                out,
                "{} {} {}",
                rng.u32(1..10_000),
                pick(rng, &LAST),
                pick(rng, &STREETS)
            );
        }
        Fake::ZipCode => {
            let _ = write!(out, "{:05}", rng.u32(..100_000));
        }
        Fake::CompanyName => {
            let _ = write!(out, "{} {}", pick(rng, &LAST), pick(rng, &COMPANY));
        }
        Fake::Number => {
            let _ = write!(out, "{}", rng.u64(..=(1u64 << 53) - 1));
        }
        Fake::Boolean => out.push_str(if rng.bool() { "true" } else { "false" }),
        Fake::Url => {
            let _ = write!(out, "https://{}.example.com/", pick(rng, &WORDS));
        }
        Fake::Ip => {
            let _ = write!(
                out,
                "{}.{}.{}.{}",
                rng.u8(..),
                rng.u8(..),
                rng.u8(..),
                rng.u8(..)
            );
        }
        Fake::Word => out.push_str(pick(rng, &WORDS)),
        Fake::Sentence => sentence(rng, out),
        Fake::Paragraph | Fake::Text => {
            for i in 0..rng.usize(3..6) {
                if i > 0 {
                    out.push(' ');
                }
                sentence(rng, out);
            }
        }
        Fake::JobTitle => {
            let _ = write!(
                out,
                "{} {} {}",
                pick(rng, &LEVELS),
                pick(rng, &AREAS),
                pick(rng, &ROLES)
            );
        }
        Fake::Color => out.push_str(pick(rng, &COLORS)),
        Fake::ProductName => {
            let _ = write!(
                out,
                "{} {} {}",
                pick(rng, &ADJECTIVES),
                pick(rng, &MATERIALS),
                pick(rng, &PRODUCTS)
            );
        }
    }
}

/// Three to ten words, the first capitalized, ending with a full stop.
fn sentence(rng: &mut fastrand::Rng, out: &mut String) {
    for i in 0..rng.usize(3..=10) {
        let word = WORDS[rng.usize(..WORDS.len())];
        if i == 0 {
            let mut c = word.chars();
            out.extend(c.next().map(|c| c.to_ascii_uppercase()));
            out.push_str(c.as_str());
        } else {
            out.push(' ');
            out.push_str(word);
        }
    }
    out.push('.');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(f: Fake, seed: u64) -> String {
        let mut out = String::new();
        render(f, &mut fastrand::Rng::with_seed(seed), &mut out);
        out
    }

    #[test]
    fn values_have_the_shape_of_fakers() {
        for seed in 0..50 {
            let email = one(Fake::Email, seed);
            let (user, domain) = email.split_once('@').unwrap();
            assert!(
                user.contains('.') && domain.starts_with("example."),
                "{email}"
            );
            let uuid = one(Fake::Uuid, seed);
            let groups: Vec<&str> = uuid.split('-').collect();
            assert_eq!(
                groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12]
            );
            assert!(groups[2].starts_with('4'), "{uuid}");
            assert!(matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{uuid}");
            let n: u64 = one(Fake::Number, seed).parse().unwrap();
            assert!(n < 1 << 53);
            assert_eq!(one(Fake::Password, seed).len(), 15);
            assert_eq!(one(Fake::ZipCode, seed).len(), 5);
            assert!(one(Fake::Ip, seed).parse::<std::net::Ipv4Addr>().is_ok());
            let s = one(Fake::Sentence, seed);
            assert!(
                s.ends_with('.') && s.chars().next().unwrap().is_uppercase(),
                "{s}"
            );
        }
        assert_ne!(one(Fake::FullName, 1), one(Fake::FullName, 2));
    }
}
