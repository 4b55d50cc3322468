//! Fake data for templates, as Artillery's built-in fake-data plugin gives it: `{{
//! $internetEmail() }}`, `{{ $personFirstName() }}` and the older `$rand…` names
//! (`$randEmail()`, `$randFullName()`…) that the plugin still answers.
//!
//! The plugin calls the Faker library, whose functions are named by module and function
//! (`internetEmail`). The common ones render values of the same shape here, from small word
//! lists of our own; any other function of a Faker module renders a random word, since a load
//! test needs a value that varies, rarely a realistic one. Written by hand: no Rust crate
//! speaks Faker's names, and a realistic generator's locale data would dwarf the binary for a
//! few fields.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// A fake-data function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fake {
    /// `internetEmail`, `randEmail`.
    Email,
    /// `personFullName`, `randFullName`.
    FullName,
    /// `personFirstName`, `randFirstName`.
    FirstName,
    /// `personLastName`, `randLastName`.
    LastName,
    /// `internetUsername`, `randUserName`.
    UserName,
    /// `internetPassword`, `randPassword`: 15 letters and digits.
    Password,
    /// `stringUuid`, `randUuid`: a version 4 UUID.
    Uuid,
    /// `phoneNumber`, `randPhoneNumber`.
    Phone,
    /// `locationCity`, `randCity`.
    City,
    /// `locationCountry`, `randCountry`.
    Country,
    /// `locationStreetAddress`, `randStreetAddress`.
    StreetAddress,
    /// `locationZipCode`, `randZipCode`.
    ZipCode,
    /// `companyName`, `randCompanyName`.
    CompanyName,
    /// `numberInt`, `randNumber`: 0 to 2^53 − 1, Faker's default range.
    Number,
    /// `datatypeBoolean`, `randBoolean`.
    Boolean,
    /// `internetUrl`, `randUrl`.
    Url,
    /// `internetIpv4`, `randIp`.
    Ip,
    /// `loremWord`, `randWord`, and any other function of a Faker module.
    Word,
    /// `loremSentence`, `randSentence`.
    Sentence,
    /// `loremParagraph`, `randParagraph`.
    Paragraph,
    /// `loremText`, `randText`.
    Text,
    /// `personJobTitle`, `randJobTitle`.
    JobTitle,
    /// `colorHuman`, `randColor`.
    Color,
    /// `commerceProductName`, `randProductName`.
    ProductName,
}

/// Each function by its Faker name and by the plugin's older alias.
const NAMES: [(&str, &str, Fake); 24] = [
    ("internetEmail", "randEmail", Fake::Email),
    ("personFullName", "randFullName", Fake::FullName),
    ("personFirstName", "randFirstName", Fake::FirstName),
    ("personLastName", "randLastName", Fake::LastName),
    ("internetUsername", "randUserName", Fake::UserName),
    ("internetPassword", "randPassword", Fake::Password),
    ("stringUuid", "randUuid", Fake::Uuid),
    ("phoneNumber", "randPhoneNumber", Fake::Phone),
    ("locationCity", "randCity", Fake::City),
    ("locationCountry", "randCountry", Fake::Country),
    (
        "locationStreetAddress",
        "randStreetAddress",
        Fake::StreetAddress,
    ),
    ("locationZipCode", "randZipCode", Fake::ZipCode),
    ("companyName", "randCompanyName", Fake::CompanyName),
    ("numberInt", "randNumber", Fake::Number),
    ("datatypeBoolean", "randBoolean", Fake::Boolean),
    ("internetUrl", "randUrl", Fake::Url),
    ("internetIpv4", "randIp", Fake::Ip),
    ("loremWord", "randWord", Fake::Word),
    ("loremSentence", "randSentence", Fake::Sentence),
    ("loremParagraph", "randParagraph", Fake::Paragraph),
    ("loremText", "randText", Fake::Text),
    ("personJobTitle", "randJobTitle", Fake::JobTitle),
    ("colorHuman", "randColor", Fake::Color),
    ("commerceProductName", "randProductName", Fake::ProductName),
];

/// Faker's modules: a function `<module><Name>` of one of them is a fake-data function.
const MODULES: [&str; 26] = [
    "airline", "animal", "book", "color", "commerce", "company", "database", "datatype", "date",
    "finance", "food", "git", "hacker", "image", "internet", "location", "lorem", "music",
    "number", "person", "phone", "science", "string", "system", "vehicle", "word",
];

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

impl Fake {
    /// The function a template names (`internetEmail`, `randEmail`, or another function of a
    /// Faker module), or `None` when it is none of them.
    pub fn named(name: &str) -> Option<Fake> {
        if let Some((_, _, f)) = NAMES.iter().find(|(a, b, _)| *a == name || *b == name) {
            return Some(*f);
        }
        let faker = MODULES.iter().any(|m| {
            name.strip_prefix(m)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|c| c.is_ascii_uppercase())
        });
        faker.then_some(Fake::Word)
    }

    /// Appends a value to `out`.
    pub fn render(self, rng: &mut fastrand::Rng, out: &mut String) {
        let pick = |rng: &mut fastrand::Rng, list: &[&'static str]| list[rng.usize(..list.len())];
        match self {
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
        f.render(&mut fastrand::Rng::with_seed(seed), &mut out);
        out
    }

    #[test]
    fn both_names_of_a_function_and_any_faker_function_are_known() {
        assert_eq!(Fake::named("randEmail"), Some(Fake::Email));
        assert_eq!(Fake::named("internetEmail"), Some(Fake::Email));
        assert_eq!(Fake::named("airlineAirport"), Some(Fake::Word));
        assert_eq!(Fake::named("internet"), None);
        assert_eq!(Fake::named("randomNumber"), None);
        assert_eq!(Fake::named("personlowercase"), None);
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
