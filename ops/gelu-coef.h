/* GELU in its erf form, y = x / 2 * (1 + erf(x / sqrt 2)): the coefficients shared by the
 * scalar kernel (rows.c) and the vector one (vmath-impl.h). With u = x / sqrt 2 and a = |u|,
 * 1 + erf(u) is 1 + u * P(u^2) on a <= GELU_T, and 2 - erfc(a) or erfc(a) beyond it, erfc
 * taken as exp(log erfc(a)) so that the negative tail keeps its relative accuracy. Not a
 * header of its own: included by those files only. */
/* erf(u) / u in t = u^2 on |u| <= GELU_T; log erfc(a) in a on [GELU_T, 4]; log erfc(a) + a^2
 * in 1 / a on [4, 10.5] (least-squares fits on Chebyshev nodes, evaluated in float). */
#define GELU_T 0.921875f

static const float gelu_a[7] = { 1.128379166924836f, -0.37612635299705566f, 0.11283713845501707f,
                                  -0.026860241160590798f, 0.005202835680865455f,
                                  -0.0008160783808745066f, 8.438768373435378e-05f };
static const float gelu_b[11] = { 0.00021796237384489616f, -1.1296993855047295f, -0.6330528754553207f,
                                  -0.10845022283303359f, 0.025035268515289307f,
                                  -0.003971806963315637f, 0.00029362911301459237f,
                                  3.1964108211971475e-05f, -1.1220687579544813e-05f,
                                  1.2263072724998258e-06f, -5.145243027640951e-08f };
static const float gelu_c[7] = { -4.874378233300642f, 37.89696891056051f, -294.43701069685864f,
                                  1593.0086374568161f, -5369.67537362381f, 10129.114448399561f,
                                  -8161.349534865137f };
