/// HTML's named character references that clipboards carry: the markup characters, spaces and
/// dashes, quotes, Latin-1's letters and signs, arrows, and the common mathematical and Greek
/// ones. Browsers and office suites write other characters as UTF-8 or as numeric references
/// (decoded whatever their value); a name not listed here is left as written, as a browser leaves
/// a name it does not know.
enum HTMLEntities {
    /// The names read without their `;` too (HTML's legacy rule for these).
    static let legacy: Set<String> = ["amp", "lt", "gt", "quot", "nbsp", "copy", "reg", "AMP", "LT", "GT", "QUOT"]

    static let named: [String: Unicode.Scalar] = [
        "amp": "&", "AMP": "&", "lt": "<", "LT": "<", "gt": ">", "GT": ">", "quot": "\"", "QUOT": "\"", "apos": "'",
        "nbsp": "\u{A0}", "ensp": "\u{2002}", "emsp": "\u{2003}", "thinsp": "\u{2009}", "zwnj": "\u{200C}", "zwj": "\u{200D}",
        "lrm": "\u{200E}", "rlm": "\u{200F}", "shy": "\u{AD}",
        "ndash": "\u{2013}", "mdash": "\u{2014}", "minus": "\u{2212}", "hyphen": "\u{2010}", "dash": "\u{2010}",
        "lsquo": "\u{2018}", "rsquo": "\u{2019}", "sbquo": "\u{201A}", "ldquo": "\u{201C}", "rdquo": "\u{201D}", "bdquo": "\u{201E}",
        "laquo": "\u{AB}", "raquo": "\u{BB}", "lsaquo": "\u{2039}", "rsaquo": "\u{203A}", "prime": "\u{2032}", "Prime": "\u{2033}",
        "hellip": "\u{2026}", "bull": "\u{2022}", "middot": "\u{B7}", "dagger": "\u{2020}", "Dagger": "\u{2021}", "permil": "\u{2030}",
        "copy": "\u{A9}", "reg": "\u{AE}", "trade": "\u{2122}", "sect": "\u{A7}", "para": "\u{B6}", "deg": "\u{B0}",
        "plusmn": "\u{B1}", "times": "\u{D7}", "divide": "\u{F7}", "frac12": "\u{BD}", "frac14": "\u{BC}", "frac34": "\u{BE}",
        "sup1": "\u{B9}", "sup2": "\u{B2}", "sup3": "\u{B3}", "micro": "\u{B5}", "not": "\u{AC}", "ordf": "\u{AA}", "ordm": "\u{BA}",
        "cent": "\u{A2}", "pound": "\u{A3}", "yen": "\u{A5}", "euro": "\u{20AC}", "curren": "\u{A4}", "brvbar": "\u{A6}",
        "uml": "\u{A8}", "macr": "\u{AF}", "acute": "\u{B4}", "cedil": "\u{B8}", "iexcl": "\u{A1}", "iquest": "\u{BF}",
        "Agrave": "\u{C0}", "Aacute": "\u{C1}", "Acirc": "\u{C2}", "Atilde": "\u{C3}", "Auml": "\u{C4}", "Aring": "\u{C5}", "AElig": "\u{C6}",
        "Ccedil": "\u{C7}", "Egrave": "\u{C8}", "Eacute": "\u{C9}", "Ecirc": "\u{CA}", "Euml": "\u{CB}", "Igrave": "\u{CC}", "Iacute": "\u{CD}",
        "Icirc": "\u{CE}", "Iuml": "\u{CF}", "ETH": "\u{D0}", "Ntilde": "\u{D1}", "Ograve": "\u{D2}", "Oacute": "\u{D3}", "Ocirc": "\u{D4}",
        "Otilde": "\u{D5}", "Ouml": "\u{D6}", "Oslash": "\u{D8}", "Ugrave": "\u{D9}", "Uacute": "\u{DA}", "Ucirc": "\u{DB}", "Uuml": "\u{DC}",
        "Yacute": "\u{DD}", "THORN": "\u{DE}", "szlig": "\u{DF}", "agrave": "\u{E0}", "aacute": "\u{E1}", "acirc": "\u{E2}", "atilde": "\u{E3}",
        "auml": "\u{E4}", "aring": "\u{E5}", "aelig": "\u{E6}", "ccedil": "\u{E7}", "egrave": "\u{E8}", "eacute": "\u{E9}", "ecirc": "\u{EA}",
        "euml": "\u{EB}", "igrave": "\u{EC}", "iacute": "\u{ED}", "icirc": "\u{EE}", "iuml": "\u{EF}", "eth": "\u{F0}", "ntilde": "\u{F1}",
        "ograve": "\u{F2}", "oacute": "\u{F3}", "ocirc": "\u{F4}", "otilde": "\u{F5}", "ouml": "\u{F6}", "oslash": "\u{F8}", "ugrave": "\u{F9}",
        "uacute": "\u{FA}", "ucirc": "\u{FB}", "uuml": "\u{FC}", "yacute": "\u{FD}", "thorn": "\u{FE}", "yuml": "\u{FF}", "Yuml": "\u{178}",
        "OElig": "\u{152}", "oelig": "\u{153}", "Scaron": "\u{160}", "scaron": "\u{161}", "fnof": "\u{192}", "circ": "\u{2C6}", "tilde": "\u{2DC}",
        "larr": "\u{2190}", "uarr": "\u{2191}", "rarr": "\u{2192}", "darr": "\u{2193}", "harr": "\u{2194}", "lArr": "\u{21D0}", "rArr": "\u{21D2}",
        "hArr": "\u{21D4}", "crarr": "\u{21B5}",
        "forall": "\u{2200}", "part": "\u{2202}", "exist": "\u{2203}", "empty": "\u{2205}", "nabla": "\u{2207}", "isin": "\u{2208}",
        "notin": "\u{2209}", "ni": "\u{220B}", "prod": "\u{220F}", "sum": "\u{2211}", "lowast": "\u{2217}", "radic": "\u{221A}",
        "prop": "\u{221D}", "infin": "\u{221E}", "ang": "\u{2220}", "and": "\u{2227}", "or": "\u{2228}", "cap": "\u{2229}", "cup": "\u{222A}",
        "int": "\u{222B}", "there4": "\u{2234}", "sim": "\u{223C}", "cong": "\u{2245}", "asymp": "\u{2248}", "ne": "\u{2260}",
        "equiv": "\u{2261}", "le": "\u{2264}", "ge": "\u{2265}", "sub": "\u{2282}", "sup": "\u{2283}", "sube": "\u{2286}", "supe": "\u{2287}",
        "oplus": "\u{2295}", "otimes": "\u{2297}", "perp": "\u{22A5}", "sdot": "\u{22C5}", "loz": "\u{25CA}", "spades": "\u{2660}",
        "clubs": "\u{2663}", "hearts": "\u{2665}", "diams": "\u{2666}", "check": "\u{2713}", "star": "\u{2606}", "starf": "\u{2605}",
        "Alpha": "\u{391}", "Beta": "\u{392}", "Gamma": "\u{393}", "Delta": "\u{394}", "Epsilon": "\u{395}", "Zeta": "\u{396}", "Eta": "\u{397}",
        "Theta": "\u{398}", "Iota": "\u{399}", "Kappa": "\u{39A}", "Lambda": "\u{39B}", "Mu": "\u{39C}", "Nu": "\u{39D}", "Xi": "\u{39E}",
        "Omicron": "\u{39F}", "Pi": "\u{3A0}", "Rho": "\u{3A1}", "Sigma": "\u{3A3}", "Tau": "\u{3A4}", "Upsilon": "\u{3A5}", "Phi": "\u{3A6}",
        "Chi": "\u{3A7}", "Psi": "\u{3A8}", "Omega": "\u{3A9}", "alpha": "\u{3B1}", "beta": "\u{3B2}", "gamma": "\u{3B3}", "delta": "\u{3B4}",
        "epsilon": "\u{3B5}", "zeta": "\u{3B6}", "eta": "\u{3B7}", "theta": "\u{3B8}", "iota": "\u{3B9}", "kappa": "\u{3BA}", "lambda": "\u{3BB}",
        "mu": "\u{3BC}", "nu": "\u{3BD}", "xi": "\u{3BE}", "omicron": "\u{3BF}", "pi": "\u{3C0}", "rho": "\u{3C1}", "sigmaf": "\u{3C2}",
        "sigma": "\u{3C3}", "tau": "\u{3C4}", "upsilon": "\u{3C5}", "phi": "\u{3C6}", "chi": "\u{3C7}", "psi": "\u{3C8}", "omega": "\u{3C9}",
    ]
}
